// A CPU feature that an intrinsics body outside Highway needs (AVX-512 VNNI, AVX-VNNI, the Arm
// dot product): detected once on first use, turned off by environment switches (to measure or
// test what a CPU without it runs) and by tests. The dispatch asks Available() per call.
#pragma once

#include <atomic>
#include <cstdlib>

namespace slm::kernels {

// True when the environment variable `name` is set to anything but "" or "0".
inline bool SwitchedOnInEnvironment(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' && v[0] != '0';
}
inline bool DisabledByEnvironment(const char* name) { return SwitchedOnInEnvironment(name); }

class CpuFeature {
 public:
  // detect: whether this CPU and build have the feature. off_a / off_b: environment switches
  // that turn it off (off_b may be null).
  constexpr CpuFeature(bool (*detect)(), const char* off_a, const char* off_b = nullptr)
      : detect_(detect), off_a_(off_a), off_b_(off_b) {}

  bool Available() {
    int state = state_.load(std::memory_order_relaxed);
    if (state < 0) {  // racing first calls compute the same answer
      state = Probe() ? 1 : 0;
      state_.store(state, std::memory_order_relaxed);
    }
    return state == 1 && enabled_for_test_.load(std::memory_order_relaxed);
  }
  void SetEnabledForTest(bool enabled) { enabled_for_test_.store(enabled, std::memory_order_relaxed); }

 private:
  bool Probe() const {
    if (DisabledByEnvironment(off_a_) || (off_b_ != nullptr && DisabledByEnvironment(off_b_))) return false;
    return detect_();
  }

  bool (*detect_)();
  const char* off_a_;
  const char* off_b_;
  std::atomic<int> state_{-1};  // -1 not probed yet, 0 absent or switched off, 1 present
  std::atomic<bool> enabled_for_test_{true};
};

}  // namespace slm::kernels
