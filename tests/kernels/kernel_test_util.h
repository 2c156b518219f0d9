// Shared helpers of the kernel tests: deterministic random data, tolerance checks that name the
// first offending element, and the fixture that runs a test once per supported SIMD target.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/kernels.h"

namespace slm::kernels::testing {

inline constexpr float kInf = std::numeric_limits<float>::infinity();

// Lengths around every vector width (1, 4, 8, 16 lanes) and a few larger ones.
inline constexpr int64_t kLengths[] = {1,  2,  3,  7,   15,  16,  17,  31,  33,
                                       63, 64, 65, 127, 129, 255, 257, 4099};

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Passes when |got[i] - want[i]| <= abs_tol + rel_tol * |scale[i]| for all i, where scale is
// `want` itself unless given (e.g. Σ|x·w| for a dot product, which bounds its rounding error
// even when the result cancels to ~0).
inline ::testing::AssertionResult AllNear(const std::vector<float>& got,
                                          const std::vector<float>& want, float rel_tol,
                                          float abs_tol, const std::vector<float>* scale = nullptr) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size differs";
  for (size_t i = 0; i < got.size(); ++i) {
    const float s = scale ? (*scale)[i] : want[i];
    const float tol = abs_tol + rel_tol * std::fabs(s);
    const bool same_nonfinite = !std::isfinite(want[i]) && got[i] == want[i];
    if (!same_nonfinite && !(std::fabs(got[i] - want[i]) <= tol)) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want "
                                           << want[i] << " (tolerance " << tol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs each TEST_P of a suite once per Highway target this CPU supports, with dispatch forced
// to that target, so every compiled SIMD path is checked (not only the best one).
class PerTargetTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    ForceSimdTargetForTest(GetParam());
    ASSERT_STREQ(ActiveSimdTarget(), hwy::TargetName(GetParam()));
  }
  void TearDown() override { ForceSimdTargetForTest(0); }
};

inline std::string TargetParamName(const ::testing::TestParamInfo<int64_t>& info) {
  return hwy::TargetName(info.param);
}

}  // namespace slm::kernels::testing

#define SLM_INSTANTIATE_FOR_ALL_TARGETS(suite)                                         \
  INSTANTIATE_TEST_SUITE_P(AllTargets, suite,                                          \
                           ::testing::ValuesIn(::slm::kernels::SupportedSimdTargets()), \
                           ::slm::kernels::testing::TargetParamName)
