#include "model/rope.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

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

}  // namespace
}  // namespace slm::model
