// The low-rank factor of calibration statistics (quant/hessian_factor.h): ‖e·F‖² equals the
// dense e·H·eᵀ (to f32 rounding) for full-rank and rank-deficient H, the rank found is H's, and a rank above the
// cap gives no factor.
#include "quant/hessian_factor.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace slm::quant {
namespace {

// H = Σ xᵀx over `rows` random rows of length k (rank min(rows, k)), optionally with a channel
// that no row ever activates.
std::vector<double> RandomHessian(int64_t k, int64_t rows, uint32_t seed, bool silent_channel = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> h(size_t(k * k), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> x(static_cast<size_t>(k));
    for (auto& v : x) v = dist(rng) * (1 + 10 * (r % 3 == 0));  // some rows 10× larger
    if (silent_channel) x[0] = 0;
    for (int64_t a = 0; a < k; ++a) {
      for (int64_t b = 0; b < k; ++b) h[size_t(a * k + b)] += x[size_t(a)] * x[size_t(b)];
    }
  }
  return h;
}

std::vector<float> RandomRows(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> e(size_t(n * k));
  for (auto& v : e) v = dist(rng);
  return e;
}

TEST(HessianFactorTest, FactorGivesTheDenseErrorEnergyOnFullAndDeficientRanks) {
  struct Case {
    int64_t k, rows, n;
    bool silent;
  };
  for (const Case c : {Case{1, 1, 1, false}, Case{7, 3, 5, false}, Case{7, 20, 3, false}, Case{64, 12, 9, false},
                       Case{64, 200, 17, false}, Case{33, 5, 1, true}, Case{129, 40, 4, true}}) {
    const std::vector<double> h = RandomHessian(c.k, c.rows, uint32_t(c.k + c.rows), c.silent);
    const auto f = FactorHessian(h.data(), c.k, c.k);
    ASSERT_TRUE(f.has_value());
    const int64_t expected_rank = std::min(c.rows, c.k - (c.silent ? 1 : 0));
    EXPECT_EQ(f->rank, expected_rank) << "k " << c.k << " rows " << c.rows;
    const std::vector<float> e = RandomRows(c.n, c.k, 7);
    const double dense = ErrorEnergy(e.data(), c.n, c.k, h.data());
    EXPECT_GT(dense, 0);
    // e·F goes through the f32 product kernel.
    EXPECT_NEAR(ErrorEnergy(e.data(), c.n, *f), dense, 1e-5 * dense) << "k " << c.k << " rows " << c.rows;
  }
}

TEST(HessianFactorTest, RankAboveTheCapGivesNoFactorAndZeroHessianGivesRankZero) {
  const std::vector<double> h = RandomHessian(16, 10, 3);
  EXPECT_FALSE(FactorHessian(h.data(), 16, 9).has_value());
  EXPECT_TRUE(FactorHessian(h.data(), 16, 10).has_value());
  const std::vector<double> zero(16 * 16, 0.0);
  const auto f = FactorHessian(zero.data(), 16, 16);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rank, 0);
  const std::vector<float> e = RandomRows(3, 16, 1);
  EXPECT_EQ(ErrorEnergy(e.data(), 3, *f), 0.0);
}

}  // namespace
}  // namespace slm::quant
