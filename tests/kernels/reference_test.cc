// The scalar reference kernels against small cases computed by hand (or with double-precision
// formulas written out in the test), so the ground truth itself is checked.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/reference.h"

namespace slm::kernels::reference {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(ReferenceMatMul, SmallProductWithBias) {
  const float x[] = {1, 2, 3, 4};              // [2, 2]
  const float w[] = {3, 4, 5, 6, -1, 1};       // [3, 2]
  const float b[] = {0.5f, -1, 0};
  float y[6];
  MatMulF32(x, w, b, y, 2, 2, 3);
  EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{11.5f, 16, 1, 25.5f, 38, 1}));
  MatMulF32(x, w, nullptr, y, 2, 2, 3);
  EXPECT_EQ(y[0], 11.0f);
}

TEST(ReferenceRmsNorm, PlainAndAddOneWeights) {
  const float x[] = {3, 4};
  const float w[] = {0.5f, -1};
  const double rms = std::sqrt((9.0 + 16.0) / 2.0);
  float y[2];
  RmsNorm(x, w, y, 1, 2, 0.0f, /*add_one=*/false);
  EXPECT_NEAR(y[0], 3 / rms * 0.5, 1e-6);
  EXPECT_NEAR(y[1], 4 / rms * -1, 1e-6);
  RmsNorm(x, w, y, 1, 2, 0.0f, /*add_one=*/true);  // Gemma: (1 + w)
  EXPECT_NEAR(y[0], 3 / rms * 1.5, 1e-6);
  EXPECT_EQ(y[1], 0.0f);
  // eps is added to the mean square before the root.
  RmsNorm(x, w, y, 1, 2, 3.5f, false);
  EXPECT_NEAR(y[0], 3 / std::sqrt(12.5 + 3.5) * 0.5, 1e-6);
}

TEST(ReferenceEmbedding, GathersScaledRows) {
  const float table[] = {0, 1, 10, 11, 20, 21};  // V=3, D=2
  const int32_t ids[] = {2, 0};
  float out[4];
  ASSERT_TRUE(Embedding(ids, table, out, 2, 3, 2, 2.0f));
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{40, 42, 0, 2}));
}

TEST(ReferenceEmbedding, OutOfRangeIdReturnsFalseAndWritesNothing) {
  const float table[] = {0, 1, 10, 11, 20, 21};
  for (int32_t bad : {3, -1, std::numeric_limits<int32_t>::max()}) {
    const int32_t ids[] = {1, bad};
    float out[4] = {7, 7, 7, 7};
    EXPECT_FALSE(Embedding(ids, table, out, 2, 3, 2, 1.0f)) << bad;
    EXPECT_FALSE(slm::kernels::Embedding(ids, table, out, 2, 3, 2, 1.0f)) << bad;
    EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{7, 7, 7, 7}));
  }
}

TEST(ReferenceRope, RotatesPairsHalfApart) {
  // One head, head_dim 4, full rotation: pairs (0,2) and (1,3).
  const float x[] = {1, 2, 3, 4};
  const float inv_freq[] = {1.0f, 0.5f};
  const int32_t pos[] = {3};
  float y[4];
  Rope(x, pos, inv_freq, y, 1, 1, 4, 4, 1.0f);
  const double a0 = 3.0, a1 = 1.5;
  EXPECT_NEAR(y[0], 1 * std::cos(a0) - 3 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[2], 3 * std::cos(a0) + 1 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[1], 2 * std::cos(a1) - 4 * std::sin(a1), 1e-6);
  EXPECT_NEAR(y[3], 4 * std::cos(a1) + 2 * std::sin(a1), 1e-6);
}

TEST(ReferenceRope, QuarterTurnMapsX1ToX2) {
  // angle = π/2 (as close as float gets): (x1, x2) -> (-x2, x1).
  const float x[] = {1, 0};
  const float inv_freq[] = {float(M_PI / 2)};
  const int32_t pos[] = {1};
  float y[2];
  Rope(x, pos, inv_freq, y, 1, 1, 2, 2, 1.0f);
  EXPECT_NEAR(y[0], 0.0f, 1e-7);
  EXPECT_NEAR(y[1], 1.0f, 1e-7);
}

TEST(ReferenceRope, PartialRotaryScalingPaddingAndHeads) {
  // 2 heads of head_dim 6, rotary_dim 4: dims 4,5 of each head pass through.
  std::vector<float> x(2 * 12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i + 1);
  const float inv_freq[] = {0.25f, 0.125f};
  const int32_t pos[] = {2, -1};  // row 1 is padding
  std::vector<float> y(x.size());
  Rope(x.data(), pos, inv_freq, y.data(), 2, 2, 6, 4, 2.0f);
  for (int h = 0; h < 2; ++h) {
    const float* xh = x.data() + 6 * h;
    const float* yh = y.data() + 6 * h;
    for (int i = 0; i < 2; ++i) {
      const float angle = 2.0f * inv_freq[i];
      const double c = 2.0 * std::cos(angle), s = 2.0 * std::sin(angle);
      EXPECT_NEAR(yh[i], xh[i] * c - xh[i + 2] * s, 1e-5) << h << " " << i;
      EXPECT_NEAR(yh[i + 2], xh[i + 2] * c + xh[i] * s, 1e-5) << h << " " << i;
    }
    EXPECT_EQ(yh[4], xh[4]);
    EXPECT_EQ(yh[5], xh[5]);
  }
  for (int i = 12; i < 24; ++i) EXPECT_EQ(y[size_t(i)], x[size_t(i)]) << "padding row changed";
  // In place gives the same bits.
  std::vector<float> inplace = x;
  Rope(inplace.data(), pos, inv_freq, inplace.data(), 2, 2, 6, 4, 2.0f);
  EXPECT_EQ(inplace, y);
}

// Attention with T=1, one head, head_dim 2, L cache slots; returns out.
std::vector<float> Attend1(const std::vector<float>& q, const std::vector<float>& k_cache,
                           const std::vector<float>& v_cache, const std::vector<float>& k,
                           const std::vector<float>& v, const std::vector<float>& mask,
                           float scale, float softcap, bool simd) {
  const int64_t L = int64_t(k_cache.size() / 2);
  std::vector<float> out(2), scratch(size_t(slm::kernels::AttentionScratchFloats(L, 1, 1, 1, 2)));
  (simd ? &slm::kernels::Attention : &Attention)(q.data(), k.data(), v.data(), k_cache.data(),
                                                 v_cache.data(), mask.data(), out.data(),
                                                 scratch.data(), 1, L, 1, 1, 2, scale, softcap);
  return out;
}

TEST(ReferenceAttention, SingleVisibleColumnReturnsItsValue) {
  const std::vector<float> q = {1, 2}, k_cache = {1, 0, 0, 1, 5, 5}, v_cache = {1, 2, 3, 4, 5, 6};
  const std::vector<float> k = {2, 2}, v = {7, 8};
  for (bool simd : {false, true}) {
    // Only cache slot 1 visible.
    auto out = Attend1(q, k_cache, v_cache, k, v, {-kInf, 0, -kInf, -kInf}, 1.0f, 0.0f, simd);
    EXPECT_EQ(out, (std::vector<float>{3, 4}));
    // Only the new column visible.
    out = Attend1(q, k_cache, v_cache, k, v, {-kInf, -kInf, -kInf, 0}, 1.0f, 0.0f, simd);
    EXPECT_EQ(out, (std::vector<float>{7, 8}));
  }
}

TEST(ReferenceAttention, SoftmaxWithScaleSoftcapAndAdditiveMask) {
  const std::vector<float> q = {1, 2}, k_cache = {1, 0, 0, 1}, v_cache = {1, 0, 0, 1};
  const std::vector<float> k = {3, 3}, v = {10, 10};
  const float scale = 0.5f, cap = 1.2f;
  const std::vector<float> mask = {0, -0.25f, -kInf};  // new column hidden
  // Scores: slot0 = q·(1,0) = 1, slot1 = q·(0,1) = 2; scaled, capped, masked.
  const double s0 = cap * std::tanh(1 * 0.5 / cap);
  const double s1 = cap * std::tanh(2 * 0.5 / cap) - 0.25;
  const double p0 = 1 / (1 + std::exp(s1 - s0));
  for (bool simd : {false, true}) {
    auto out = Attend1(q, k_cache, v_cache, k, v, mask, scale, cap, simd);
    EXPECT_NEAR(out[0], p0, 1e-6);
    EXPECT_NEAR(out[1], 1 - p0, 1e-6);
    // Without softcap.
    out = Attend1(q, k_cache, v_cache, k, v, mask, scale, 0.0f, simd);
    const double p0_plain = 1 / (1 + std::exp((1.0 - 0.25) - 0.5));
    EXPECT_NEAR(out[0], p0_plain, 1e-6);
  }
}

TEST(ReferenceAttention, GroupedQueryHeadsShareKvHead) {
  // Hq=2, Hkv=1, hd=1, L=0, T=2, causal: row 0 sees column 0, row 1 sees both.
  const float q[] = {1, -1, 0, 0};  // [T=2, Hq*hd=2]
  const float k[] = {1, 1}, v[] = {4, 8};
  const float mask[] = {0, -kInf, 0, 0};
  float out[4], scratch[2];
  Attention(q, k, v, nullptr, nullptr, mask, out, scratch, 2, 0, 2, 1, 1, 1.0f, 0.0f);
  EXPECT_EQ(out[0], 4.0f);
  EXPECT_EQ(out[1], 4.0f);
  EXPECT_NEAR(out[2], 6.0f, 1e-6);  // q = 0: uniform over both columns
  EXPECT_NEAR(out[3], 6.0f, 1e-6);
}

TEST(ReferenceKvCommit, SkipsPaddingAndWrapsRing) {
  // L = 4 slots, 1 kv head, head_dim 2. pos -1 is padding; 5 and 6 wrap to slots 1 and 2.
  const float k[] = {9, 9, 1, 2, 3, 4};
  const float v[] = {-9, -9, -1, -2, -3, -4};
  const int32_t pos[] = {-1, 5, 6};
  std::vector<float> kc(8, 0.0f), vc(8, 0.0f);
  for (bool simd : {false, true}) {
    std::fill(kc.begin(), kc.end(), 0.0f);
    std::fill(vc.begin(), vc.end(), 0.0f);
    (simd ? &slm::kernels::KvCommit : &KvCommit)(k, v, pos, kc.data(), vc.data(), 3, 4, 1, 2);
    EXPECT_EQ(kc, (std::vector<float>{0, 0, 1, 2, 3, 4, 0, 0}));
    EXPECT_EQ(vc, (std::vector<float>{0, 0, -1, -2, -3, -4, 0, 0}));
  }
}

TEST(ReferenceKvCommit, LaterRowWinsASharedSlotAndHeadsAreSeparate) {
  // L = 2, 2 kv heads, head_dim 1: positions 1 and 3 both map to slot 1; t=1 is written last.
  const float k[] = {1, 2, 3, 4};  // [T=2, Hkv*hd=2]
  const int32_t pos[] = {1, 3};
  std::vector<float> kc(4, 0.0f), vc(4, 0.0f);
  KvCommit(k, k, pos, kc.data(), vc.data(), 2, 2, 2, 1);
  EXPECT_EQ(kc, (std::vector<float>{0, 3, 0, 4}));  // [h0: slot0, slot1, h1: slot0, slot1]
}

TEST(ReferenceActivations, KnownValues) {
  const float g[] = {0, 1, -1}, u[] = {5, 2, 3};
  float y[3];
  SwiGlu(g, u, y, 3);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 2 / (1 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(y[2], -3 / (1 + std::exp(1.0)), 1e-6);

  const float x[] = {0, 1, -3};
  GeluTanh(x, y, 3);
  const auto gelu = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], gelu(1), 1e-6);  // 0.841192
  EXPECT_NEAR(y[2], gelu(-3), 1e-6);

  float z[] = {0, 1, -100, 3};
  SoftCap(z, 4, 2.0f);
  EXPECT_EQ(z[0], 0.0f);
  EXPECT_NEAR(z[1], 2 * std::tanh(0.5), 1e-6);
  EXPECT_NEAR(z[2], -2.0, 1e-6);
  EXPECT_NEAR(z[3], 2 * std::tanh(1.5), 1e-6);

  const float a[] = {1.5f, -2}, b[] = {0.25f, 2};
  Add(a, b, y, 2);
  EXPECT_EQ(y[0], 1.75f);
  EXPECT_EQ(y[1], 0.0f);
}

}  // namespace
}  // namespace slm::kernels::reference
