#include "model/rope.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/kernels.h"
#include "model/model_spec.h"
#include "test_util.h"

namespace slm::model {
namespace {

using ::testing::HasSubstr;

// The formulas of transformers' modeling_rope_utils.py, evaluated in double precision.
std::vector<double> DefaultReference(double theta, int64_t dim) {
  std::vector<double> inv(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) inv[i] = 1.0 / std::pow(theta, 2.0 * i / dim);
  return inv;
}

enum class Band { kKept, kSmoothed, kScaled };

// _compute_llama3_parameters: wavelengths shorter than orig/high_freq_factor are kept, longer
// than orig/low_freq_factor divided by factor, and interpolated in between.
double Llama3Reference(double inv, const RopeSpec& r, Band* band) {
  const double wavelen = 2 * std::numbers::pi / inv;
  const double orig = static_cast<double>(r.original_max_position_embeddings);
  if (wavelen < orig / r.high_freq_factor) {
    *band = Band::kKept;
    return inv;
  }
  if (wavelen > orig / r.low_freq_factor) {
    *band = Band::kScaled;
    return inv / r.factor;
  }
  *band = Band::kSmoothed;
  const double smooth = (orig / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return (1 - smooth) * inv / r.factor + smooth * inv;
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::abs(want[i])) << "inv_freq[" << i << "]";
  }
}

RopeSpec ZooLlamaRope() {
  auto spec = LoadModelSpec(slm::testing::SharedDir() + "/models/zoo/llama");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? spec->rope : RopeSpec{};
}

// With theta 10000 and 8 rotary dims every power is exact: 10000^(i/4) = 10^i.
TEST(Rope, DefaultGivesExactPowersWhereTheyAreExact) {
  RopeSpec rope;
  rope.rotary_dim = 8;
  RopeTables t = ComputeRopeTables(rope);
  EXPECT_EQ(t.inv_freq, (std::vector<float>{1.0f, 1.0f / 10.0f, 1.0f / 100.0f, 1.0f / 1000.0f}));
  EXPECT_EQ(t.attention_scaling, 1.0f);
}

TEST(Rope, DefaultMatchesTheFormulaForZooLlamaTheta) {
  RopeSpec rope = ZooLlamaRope();
  rope.scaling = RopeScalingType::kNone;
  ExpectClose(ComputeRopeTables(rope).inv_freq, DefaultReference(500000.0, 32));
}

TEST(Rope, LinearDividesEveryFrequencyByTheFactor) {
  RopeSpec rope = ZooLlamaRope();
  rope.scaling = RopeScalingType::kLinear;
  std::vector<double> want = DefaultReference(500000.0, 32);
  for (double& f : want) f /= 32.0;
  RopeTables t = ComputeRopeTables(rope);
  ExpectClose(t.inv_freq, want);
  EXPECT_EQ(t.attention_scaling, 1.0f);
}

// zoo/llama's PROVENANCE: with head_dim 32 and theta 5e5, 1 of the 16 frequencies is kept,
// 1 is smoothed and 14 are divided by the factor 32.
TEST(Rope, Llama3MatchesTheFormulaForZooLlama) {
  RopeSpec rope = ZooLlamaRope();
  ASSERT_EQ(rope.scaling, RopeScalingType::kLlama3);
  std::vector<double> base = DefaultReference(rope.theta, rope.rotary_dim);
  std::vector<double> want;
  int kept = 0, smoothed = 0, scaled = 0;
  for (double inv : base) {
    Band band;
    want.push_back(Llama3Reference(inv, rope, &band));
    kept += band == Band::kKept;
    smoothed += band == Band::kSmoothed;
    scaled += band == Band::kScaled;
  }
  EXPECT_EQ(kept, 1);
  EXPECT_EQ(smoothed, 1);
  EXPECT_EQ(scaled, 14);
  RopeTables t = ComputeRopeTables(rope);
  ExpectClose(t.inv_freq, want);
  EXPECT_EQ(t.inv_freq[0], 1.0f);  // kept: 1 / 5e5^0
  EXPECT_EQ(t.attention_scaling, 1.0f);
}

TEST(Rope, PartialRotaryDimsGiveHalfAsManyFrequencies) {
  RopeSpec rope;
  rope.rotary_dim = 12;
  ExpectClose(ComputeRopeTables(rope).inv_freq, DefaultReference(10000.0, 12));
}

TEST(Rope, InvalidSpecsAreRejectedAndGiveNoTable) {
  RopeSpec rope;
  rope.rotary_dim = 7;
  Status s = ValidateRopeSpec(rope);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rotary_dim is 7"));
  EXPECT_TRUE(ComputeRopeTables(rope).inv_freq.empty());

  rope.rotary_dim = 8;
  rope.scaling = RopeScalingType::kLinear;
  rope.factor = 0;
  EXPECT_THAT(ValidateRopeSpec(rope).message(), HasSubstr("factor is 0"));

  rope.scaling = RopeScalingType::kLlama3;
  rope.factor = 8;
  rope.original_max_position_embeddings = 0;
  EXPECT_THAT(ValidateRopeSpec(rope).message(), HasSubstr("original_max_position_embeddings is 0"));
}


// --- longrope: both tables, picked per call ------------------------------------------------

// A longrope spec like Phi-4-mini's rope_scaling, with distinct short and long factors.
RopeSpec LongRopeSpec() {
  RopeSpec r;
  r.theta = 10000.0;
  r.rotary_dim = 8;
  r.scaling = RopeScalingType::kLongRope;
  r.short_factor = {1.0, 1.25, 1.5, 2.0};
  r.long_factor = {1.0, 2.735880826, 8.370679318, 22.90118105};
  r.original_max_position_embeddings = 16;
  r.attention_factor = 1.19;
  return r;
}

// _compute_longrope_parameters: 1 / (ext_factors * base^(2i/dim)), in double.
std::vector<double> LongRopeReference(const RopeSpec& r, const std::vector<double>& ext) {
  std::vector<double> inv = DefaultReference(r.theta, r.rotary_dim);
  for (size_t i = 0; i < inv.size(); ++i) inv[i] /= ext[i];
  return inv;
}

TEST(Rope, LongRopeHasAShortAndALongTableAndTheSwitchLength) {
  const RopeSpec r = LongRopeSpec();
  const RopeTables t = ComputeRopeTables(r);
  ExpectClose(t.inv_freq, LongRopeReference(r, r.short_factor));
  ExpectClose(t.long_inv_freq, LongRopeReference(r, r.long_factor));
  EXPECT_EQ(t.switch_len, 16);
  EXPECT_FLOAT_EQ(t.attention_scaling, 1.19f);
  // Other rope types have one table and never switch.
  RopeSpec plain;
  plain.rotary_dim = 8;
  EXPECT_TRUE(ComputeRopeTables(plain).long_inv_freq.empty());
  EXPECT_EQ(ComputeRopeTables(plain).switch_len, 0);
}

TEST(Rope, TableIndexFollowsTheLargestValidPositionOfTheCall) {
  // seq_len = max(position_ids) + 1 > original (16) → long.
  const int32_t below[] = {0, 5, 15};       // 15 + 1 = 16, not > 16
  const int32_t straddle[] = {12, 14, 16};  // 16 + 1 > 16: the whole call is long
  const int32_t padded[] = {15, -1, -1};    // padding rows do not count
  const int32_t all_pad[] = {-1, -1};
  const int32_t one_long[] = {16};
  EXPECT_EQ(kernels::RopeTableIndex(below, 3, 16), 0);
  EXPECT_EQ(kernels::RopeTableIndex(straddle, 3, 16), 1);
  EXPECT_EQ(kernels::RopeTableIndex(padded, 3, 16), 0);
  EXPECT_EQ(kernels::RopeTableIndex(all_pad, 2, 16), 0);
  EXPECT_EQ(kernels::RopeTableIndex(one_long, 1, 16), 1);
}

// HF's rotation of one row, in double: rotate_half with cos/sin of p * inv_freq, scaled.
std::vector<double> HfRotateRow(const std::vector<float>& x, int32_t p, const std::vector<double>& inv,
                                double scaling) {
  const size_t half = inv.size();
  std::vector<double> y(x.begin(), x.end());
  for (size_t i = 0; i < half; ++i) {
    const double c = std::cos(p * inv[i]) * scaling, s = std::sin(p * inv[i]) * scaling;
    y[i] = x[i] * c - x[i + half] * s;
    y[i + half] = x[i + half] * c + x[i] * s;
  }
  return y;
}

// One call below the switch rotates with the short factors, one call whose last position
// passes original_max_position_embeddings rotates every row (even those below it) with the
// long factors, as transformers' forward does for that call.
TEST(Rope, CallsBelowAndPastTheSwitchMatchHfFormulaWithTheirTable) {
  const RopeSpec r = LongRopeSpec();
  const RopeTables t = ComputeRopeTables(r);
  std::vector<float> both = t.inv_freq;
  both.insert(both.end(), t.long_inv_freq.begin(), t.long_inv_freq.end());
  const int64_t hd = 8, half = 4;
  for (const std::vector<int32_t>& pos : {std::vector<int32_t>{3, 9, 15}, std::vector<int32_t>{14, 15, 40}}) {
    const bool long_call = pos.back() + 1 > 16;
    std::vector<float> x(pos.size() * hd);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) + 0.1f;
    std::vector<float> y(x.size());
    const int64_t T = static_cast<int64_t>(pos.size());
    const float* table = both.data() + kernels::RopeTableIndex(pos.data(), T, t.switch_len) * half;
    kernels::Rope(x.data(), pos.data(), table, y.data(), T, 1, hd, hd, t.attention_scaling);
    const std::vector<double> inv = LongRopeReference(r, long_call ? r.long_factor : r.short_factor);
    for (size_t row = 0; row < pos.size(); ++row) {
      const std::vector<float> xr(x.begin() + row * hd, x.begin() + (row + 1) * hd);
      const std::vector<double> want = HfRotateRow(xr, pos[row], inv, r.attention_factor);
      for (int64_t i = 0; i < hd; ++i) {
        EXPECT_NEAR(y[row * hd + i], want[i], 2e-5) << "pos " << pos[row] << " dim " << i
                                                    << (long_call ? " (long call)" : " (short call)");
      }
    }
  }
}

}  // namespace
}  // namespace slm::model
