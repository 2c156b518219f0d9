// GeGlu (dispatched SIMD, every target) against reference::GeGlu on awkward lengths.
//
// Tolerance: GeluTanh's (1e-6 rel of max(|gelu|, |g|, 1): hwy::Tanh's ulps, turned absolute
// where 1 + tanh cancels) scaled by |up|, plus the one rounding of the product.
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

class GeGluTest : public testing::PerTargetTest {};

TEST_P(GeGluTest, MatchesReference) {
  for (int64_t n : kLengths) {
    auto g = RandomFloats(size_t(n), uint32_t(n * 3 + 1), 4.0f);
    const auto u = RandomFloats(size_t(n), uint32_t(n * 5 + 2), 2.0f);
    // Saturation and cancellation points of tanh.
    const float extremes[] = {0.0f, -0.0f, 1e-30f, -12.0f, 12.0f, -90.0f, 90.0f, 1e4f, -1e4f};
    for (size_t i = 0; i < std::size(extremes) && i < g.size(); ++i) g[(i * 5) % g.size()] = extremes[i];
    std::vector<float> y(g.size()), want(g.size()), scale(g.size());
    GeGlu(g.data(), u.data(), y.data(), n);
    reference::GeGlu(g.data(), u.data(), want.data(), n);
    for (size_t i = 0; i < g.size(); ++i) {
      scale[i] = std::max({std::fabs(want[i]), std::fabs(g[i] * u[i]), std::fabs(u[i]), 1e-30f});
    }
    ASSERT_TRUE(AllNear(y, want, 2e-6f, 0.0f, &scale)) << "n=" << n;
    // In place over the gate and over up give the same result.
    std::vector<float> over_gate = g, over_up = u;
    GeGlu(over_gate.data(), u.data(), over_gate.data(), n);
    GeGlu(g.data(), over_up.data(), over_up.data(), n);
    ASSERT_EQ(over_gate, y) << "n=" << n;
    ASSERT_EQ(over_up, y) << "n=" << n;
  }
}

// The fused kernel is GeluTanh followed by a product, element for element.
TEST_P(GeGluTest, EqualsGeluTanhTimesUp) {
  const int64_t n = 257;
  const auto g = RandomFloats(size_t(n), 11, 3.0f), u = RandomFloats(size_t(n), 12, 1.0f);
  std::vector<float> gelu(g.size()), y(g.size());
  GeluTanh(g.data(), gelu.data(), n);
  GeGlu(g.data(), u.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], gelu[i] * u[i]) << "i=" << i;
}

// Exact GELU: the SIMD erf's absolute error (1.5e-7) becomes, after (g·0.5)·(1 + erf), at most
// ~1e-7·|g| plus a few roundings; same relative-to-scale tolerance as the tanh variant.
TEST_P(GeGluTest, ErfVariantMatchesReferenceOnAwkwardLengths) {
  for (int64_t n : kLengths) {
    auto g = RandomFloats(size_t(n), uint32_t(n * 7 + 3), 6.0f);
    const auto u = RandomFloats(size_t(n), uint32_t(n * 11 + 4), 2.0f);
    // Zeros, tiny values, the erf tails (1 + erf cancels for g << 0) and huge values.
    const float extremes[] = {0.0f, -0.0f, 1e-30f, -1e-30f, -5.5f, 5.5f, -12.0f, 12.0f, -90.0f, 90.0f, 1e4f, -1e4f};
    for (size_t i = 0; i < std::size(extremes) && i < g.size(); ++i) g[(i * 7) % g.size()] = extremes[i];
    std::vector<float> y(g.size()), want(g.size()), scale(g.size());
    GeGluErf(g.data(), u.data(), y.data(), n);
    reference::GeGluErf(g.data(), u.data(), want.data(), n);
    for (size_t i = 0; i < g.size(); ++i) {
      scale[i] = std::max({std::fabs(want[i]), std::fabs(g[i] * u[i]), std::fabs(u[i]), 1e-30f});
    }
    ASSERT_TRUE(AllNear(y, want, 2e-6f, 0.0f, &scale)) << "n=" << n;
    for (size_t i = 0; i < g.size(); ++i) ASSERT_FALSE(std::isnan(y[i])) << "n=" << n << " i=" << i;
    std::vector<float> over_gate = g, over_up = u;
    GeGluErf(over_gate.data(), u.data(), over_gate.data(), n);
    GeGluErf(g.data(), over_up.data(), over_up.data(), n);
    ASSERT_EQ(over_gate, y) << "n=" << n;
    ASSERT_EQ(over_up, y) << "n=" << n;
  }
}

// The two GELUs are different functions: around |g| ~ 1-3 they differ by ~1e-4..1e-3, far
// above either kernel's error, so an artifact that mixed them up would be caught.
TEST_P(GeGluTest, ErfAndTanhVariantsDiffer) {
  const float g[] = {-3.0f, -2.0f, -1.0f, 1.0f, 2.0f, 3.0f};
  const float u[] = {1, 1, 1, 1, 1, 1};
  float exact[6], tanh_approx[6];
  GeGluErf(g, u, exact, 6);
  GeGlu(g, u, tanh_approx, 6);
  float max_diff = 0;
  for (int i = 0; i < 6; ++i) max_diff = std::max(max_diff, std::fabs(exact[i] - tanh_approx[i]));
  EXPECT_GT(max_diff, 1e-4f);
}

SLM_INSTANTIATE_FOR_ALL_TARGETS(GeGluTest);

// reference::GeluErf against the formula in double: within a few float32 roundings.
TEST(GeluErfReference, MatchesDoublePrecisionFormula) {
  for (float x = -8.0f; x <= 8.0f; x += 0.0625f) {
    float y;
    reference::GeluErf(&x, &y, 1);
    const double want = 0.5 * double(x) * (1.0 + std::erf(double(x) / std::sqrt(2.0)));
    ASSERT_NEAR(y, want, 4e-7 * std::max(1.0, std::fabs(double(x)))) << "x=" << x;
  }
}

}  // namespace
}  // namespace slm::kernels
