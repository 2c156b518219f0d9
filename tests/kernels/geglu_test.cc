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
using testing::RandomFloats;

// Lengths around every vector width (1, 4, 8, 16 lanes) and a few larger ones.
const int64_t kLengths[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255, 257, 4099};

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

SLM_INSTANTIATE_FOR_ALL_TARGETS(GeGluTest);

}  // namespace
}  // namespace slm::kernels
