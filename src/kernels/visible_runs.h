// The visible columns of one additive attention-mask row (hidden: -inf) as runs [begin, end), in
// caller memory, so that attention walks plain index ranges and does work proportional to the
// visible columns only. Built once per row and shared by all heads: FindVisibleRuns below is
// the scalar scan (and the tests' reference); attention_body-inl.h scans a vector of the mask
// at a time and drops to this one only where a vector holds a run boundary.
#pragma once

#include <cstdint>
#include <limits>

namespace slm::kernels {

inline bool IsHiddenColumn(float mask_value) {
  return mask_value == -std::numeric_limits<float>::infinity();
}

class VisibleRuns {
 public:
  // int32 bounds a row of n columns can need: at most (n + 1) / 2 runs of two bounds each.
  static constexpr int64_t BoundsFor(int64_t n) { return n + 1; }

  // bounds[2r], bounds[2r + 1]: run r; runs ascending, non-empty, not touching.
  VisibleRuns(const int32_t* bounds, int64_t runs, int64_t count)
      : bounds_(bounds), runs_(runs), count_(count) {}

  int64_t runs() const { return runs_; }
  int64_t begin(int64_t r) const { return bounds_[2 * r]; }
  int64_t end(int64_t r) const { return bounds_[2 * r + 1]; }
  int64_t count() const { return count_; }  // visible columns

 private:
  const int32_t* bounds_;
  int64_t runs_;
  int64_t count_;
};

// Adds columns to the runs one at a time, left to right (a scan's state).
class VisibleRunsBuilder {
 public:
  explicit VisibleRunsBuilder(int32_t* bounds) : bounds_(bounds) {}

  bool in_run() const { return in_run_; }
  void Add(int64_t column, bool hidden) {
    if (hidden == in_run_) {  // a boundary: a run starts (visible) or ends (hidden) here
      bounds_[2 * runs_ + (in_run_ ? 1 : 0)] = int32_t(column);
      if (in_run_) {
        count_ += column - bounds_[2 * runs_];
        ++runs_;
      }
      in_run_ = !in_run_;
    }
  }
  // The runs of columns [0, n) once all have been added.
  VisibleRuns Finish(int64_t n) {
    if (in_run_) Add(n, true);
    return VisibleRuns(bounds_, runs_, count_);
  }

 private:
  int32_t* bounds_;
  int64_t runs_ = 0;
  int64_t count_ = 0;
  bool in_run_ = false;
};

// mask: [n], bounds: [VisibleRuns::BoundsFor(n)]. Requires n < 2^31.
inline VisibleRuns FindVisibleRuns(const float* mask, int64_t n, int32_t* bounds) {
  VisibleRunsBuilder runs(bounds);
  for (int64_t j = 0; j < n; ++j) runs.Add(j, IsHiddenColumn(mask[j]));
  return runs.Finish(n);
}

}  // namespace slm::kernels
