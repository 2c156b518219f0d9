// Element-wise kernels and RmsNorm (dispatched SIMD) against the reference, on every target.
//
// Tolerances (relative to the reference value unless said otherwise):
//   Add      exact (one rounding either way);
//   SwiGlu   1e-6 rel (hwy::Exp is within 1 ulp) + 1e-30 abs (silu underflow for g < -88);
//   GeluTanh 1e-6 rel + 1e-6·max(1,|x|) abs: hwy::Tanh is within 4 ulp, and 1 + tanh cancels
//            for x << 0, which turns those ulps into absolute, not relative, error;
//   SoftCap  1e-6 rel + 1e-6·cap abs (tanh ulps scaled by cap);
//   RmsNorm  2e-6 rel + 1e-7 abs (float32 sum of squares over D ≤ 4099 vs a double one).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "kernel_test_util.h"

namespace slm::kernels {
namespace {

using testing::AllNear;
using testing::kLengths;
using testing::RandomFloats;

// Random values plus the extremes where exp/tanh saturate or underflow.
std::vector<float> TestValues(int64_t n, uint32_t seed, float scale) {
  auto v = RandomFloats(size_t(n), seed, scale);
  const float extremes[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 90.0f, -90.0f,
                            105.0f, -105.0f, 1e4f, -1e4f};
  for (size_t i = 0; i < std::size(extremes) && i < v.size(); ++i) v[(i * 7) % v.size()] = extremes[i];
  return v;
}

class ElementwiseTest : public testing::PerTargetTest {};

TEST_P(ElementwiseTest, AddIsExact) {
  for (int64_t n : kLengths) {
    const auto a = TestValues(n, 1, 3.0f), b = TestValues(n, 2, 3.0f);
    std::vector<float> y(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    Add(a.data(), b.data(), y.data(), n);
    reference::Add(a.data(), b.data(), want.data(), n);
    ASSERT_TRUE(AllNear(y, want, 0.0f, 0.0f)) << "n=" << n;
  }
}

TEST_P(ElementwiseTest, SwiGluMatchesReference) {
  for (int64_t n : kLengths) {
    const auto g = TestValues(n, 3, 4.0f), u = TestValues(n, 4, 1.0f);
    std::vector<float> y(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    SwiGlu(g.data(), u.data(), y.data(), n);
    reference::SwiGlu(g.data(), u.data(), want.data(), n);
    ASSERT_TRUE(AllNear(y, want, 1e-6f, 1e-30f)) << "n=" << n;
    // In place over the gate gives the same result.
    std::vector<float> inplace = g;
    SwiGlu(inplace.data(), u.data(), inplace.data(), n);
    ASSERT_EQ(inplace, y) << "n=" << n;
  }
}

TEST_P(ElementwiseTest, GeluTanhMatchesReference) {
  for (int64_t n : kLengths) {
    const auto x = TestValues(n, 5, 3.0f);
    std::vector<float> y(static_cast<size_t>(n)), want(static_cast<size_t>(n)), scale(static_cast<size_t>(n));
    GeluTanh(x.data(), y.data(), n);
    reference::GeluTanh(x.data(), want.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      // Absolute part, folded into the scale: 1e-6·max(1,|x|) ≈ rel 1e-6 of max(|want|, |x|, 1).
      scale[i] = std::max({std::fabs(want[i]), std::fabs(x[i]), 1.0f});
    }
    ASSERT_TRUE(AllNear(y, want, 1e-6f, 0.0f, &scale)) << "n=" << n;
  }
}

TEST_P(ElementwiseTest, SoftCapMatchesReference) {
  for (float cap : {30.0f, 50.0f}) {
    for (int64_t n : kLengths) {
      const auto x = TestValues(n, 6, 40.0f);
      std::vector<float> y = x, want = x;
      SoftCap(y.data(), n, cap);
      reference::SoftCap(want.data(), n, cap);
      ASSERT_TRUE(AllNear(y, want, 1e-6f, 1e-6f * cap)) << "n=" << n << " cap=" << cap;
    }
  }
}

class RmsNormTest : public testing::PerTargetTest {};

TEST_P(RmsNormTest, MatchesReference) {
  for (int64_t R : {1, 2, 3, 5}) {
    for (int64_t D : kLengths) {
      for (bool add_one : {false, true}) {
        const auto x = RandomFloats(size_t(R * D), uint32_t(R * 31 + D), 2.0f);
        const auto w = RandomFloats(size_t(D), uint32_t(D), 0.5f);
        std::vector<float> y(x.size()), want(x.size());
        RmsNorm(x.data(), w.data(), y.data(), R, D, 1e-6f, add_one);
        reference::RmsNorm(x.data(), w.data(), want.data(), R, D, 1e-6f, add_one);
        ASSERT_TRUE(AllNear(y, want, 2e-6f, 1e-7f))
            << "R=" << R << " D=" << D << " add_one=" << add_one;
        std::vector<float> inplace = x;
        RmsNorm(inplace.data(), w.data(), inplace.data(), R, D, 1e-6f, add_one);
        ASSERT_EQ(inplace, y) << "in place, R=" << R << " D=" << D;
      }
    }
  }
}

SLM_INSTANTIATE_FOR_ALL_TARGETS(ElementwiseTest);
SLM_INSTANTIATE_FOR_ALL_TARGETS(RmsNormTest);

}  // namespace
}  // namespace slm::kernels
