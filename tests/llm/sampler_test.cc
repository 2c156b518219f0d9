#include "llm/sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace slm::llm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<TokenCandidate> Candidates(const std::vector<float>& values) {
  std::vector<TokenCandidate> out;
  for (size_t i = 0; i < values.size(); ++i) out.push_back({static_cast<int32_t>(i), values[i]});
  return out;
}

std::vector<int32_t> Ids(std::span<const TokenCandidate> c) {
  std::vector<int32_t> ids;
  for (const auto& x : c) ids.push_back(x.id);
  return ids;
}

std::vector<float> SoftmaxOf(const std::vector<float>& logits) {
  auto c = Candidates(logits);
  SoftmaxInPlace(c);
  std::vector<float> p;
  for (const auto& x : c) p.push_back(x.value);
  return p;
}

SamplingParams Params(float temperature, uint64_t seed = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

// --- Helpers -------------------------------------------------------------------------------------

TEST(ArgMaxTest, ReturnsIndexOfLargest) {
  const std::vector<float> v = {0.1f, 3.0f, -2.0f, 2.9f};
  EXPECT_EQ(ArgMax(v), 1);
}

TEST(ArgMaxTest, TiesGoToLowestId) {
  const std::vector<float> v = {1.0f, 5.0f, 5.0f, 5.0f};
  EXPECT_EQ(ArgMax(v), 1);
}

TEST(RepetitionPenaltyTest, DividesPositiveAndMultipliesNegativeLogits) {
  const std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.0f};
  std::vector<float> scores(4);
  const std::vector<int32_t> history = {0, 1, 3};
  ApplyRepetitionPenalty(logits, history, 2.0f, scores);
  EXPECT_THAT(scores, ElementsAre(1.0f, -4.0f, 1.0f, 0.0f));
}

TEST(RepetitionPenaltyTest, RepeatedIdIsPenalisedOnce) {
  const std::vector<float> logits = {8.0f, -1.0f};
  std::vector<float> scores(2);
  const std::vector<int32_t> history = {0, 0, 0, 1, 1};
  ApplyRepetitionPenalty(logits, history, 2.0f, scores);
  EXPECT_THAT(scores, ElementsAre(4.0f, -2.0f));
}

TEST(RepetitionPenaltyTest, IgnoresIdsOutsideVocabulary) {
  const std::vector<float> logits = {1.0f, 2.0f};
  std::vector<float> scores(2);
  const std::vector<int32_t> history = {-1, 2, 1000};
  ApplyRepetitionPenalty(logits, history, 2.0f, scores);
  EXPECT_THAT(scores, ElementsAre(1.0f, 2.0f));
}

TEST(SelectTopKTest, KeepsKBestSortedWithTiesByLowerId) {
  auto c = Candidates({0.5f, 3.0f, 1.0f, 3.0f, 2.0f});
  const size_t kept = SelectTopK(c, 3);
  ASSERT_EQ(kept, 3u);
  EXPECT_THAT(Ids(std::span(c).first(kept)), ElementsAre(1, 3, 4));
}

TEST(SelectTopKTest, KLargerThanListKeepsAll) {
  auto c = Candidates({0.5f, 3.0f});
  EXPECT_EQ(SelectTopK(c, 10), 2u);
  EXPECT_THAT(Ids(c), ElementsAre(1, 0));
  EXPECT_EQ(SelectTopK(c, 0), 2u);
}

TEST(SoftmaxTest, MatchesClosedFormAndSumsToOne) {
  const auto p = SoftmaxOf({1.0f, 2.0f, 3.0f});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(p[0], std::exp(1.0) / z, 1e-6);
  EXPECT_NEAR(p[1], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(p[2], std::exp(3.0) / z, 1e-6);
}

TEST(SoftmaxTest, LargeLogitsDoNotOverflowAndMinusInfIsZero) {
  const auto p = SoftmaxOf({1000.0f, 1000.0f, -INFINITY});
  EXPECT_FLOAT_EQ(p[0], 0.5f);
  EXPECT_FLOAT_EQ(p[1], 0.5f);
  EXPECT_EQ(p[2], 0.0f);
}

TEST(SoftmaxTest, AllMinusInfBecomesUniform) {
  const auto p = SoftmaxOf({-INFINITY, -INFINITY});
  EXPECT_FLOAT_EQ(p[0], 0.5f);
  EXPECT_FLOAT_EQ(p[1], 0.5f);
}

TEST(SoftmaxTest, PlusInfTakesAllTheMass) {
  const auto p = SoftmaxOf({INFINITY, 1.0f, INFINITY});
  EXPECT_FLOAT_EQ(p[0], 0.5f);
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_FLOAT_EQ(p[2], 0.5f);
}

TEST(SamplerTest, TinyTemperatureBehavesLikeGreedy) {
  // 30 / 1e-38 and 20 / 1e-38 both overflow to +inf; the sampler must still pick the argmax.
  Sampler s(Params(1e-38f, 1), 3);
  const std::vector<float> logits = {10.0f, 30.0f, 20.0f};
  for (int i = 0; i < 20; ++i) ASSERT_EQ(s.Sample(logits.data(), {}), 1);
}

TEST(TopPCutTest, KeepsMinimalPrefixReachingP) {
  const auto c = Candidates({0.5f, 0.3f, 0.15f, 0.05f});
  EXPECT_EQ(TopPCut(c, 0.5f), 1u);   // 0.5 >= 0.5
  EXPECT_EQ(TopPCut(c, 0.6f), 2u);   // 0.5 < 0.6 <= 0.8
  EXPECT_EQ(TopPCut(c, 0.85f), 3u);  // 0.8 < 0.85 <= 0.95
  EXPECT_EQ(TopPCut(c, 0.99f), 4u);
  EXPECT_EQ(TopPCut(c, 1.0f), 4u);
}

TEST(TopPCutTest, AlwaysKeepsAtLeastOneToken) {
  const auto c = Candidates({0.9f, 0.1f});
  EXPECT_EQ(TopPCut(c, 1e-6f), 1u);
}

TEST(MinPFilterTest, KeepsTokensAtLeastMinPTimesMaxInOrder) {
  auto c = Candidates({0.1f, 0.5f, 0.25f, 0.24f, 0.01f});
  const size_t kept = MinPFilter(c, 0.5f);  // threshold 0.25
  EXPECT_THAT(Ids(std::span(c).first(kept)), ElementsAre(1, 2));
}

TEST(MinPFilterTest, MinPOneKeepsOnlyTheMaxAndZeroKeepsAll) {
  auto c = Candidates({0.2f, 0.6f, 0.2f});
  EXPECT_EQ(MinPFilter(c, 0.0f), 3u);
  const size_t kept = MinPFilter(c, 1.0f);
  EXPECT_THAT(Ids(std::span(c).first(kept)), ElementsAre(1));
}

TEST(SampleFromProbsTest, InverseCdfOnUnnormalisedMass) {
  const auto c = Candidates({1.0f, 0.0f, 3.0f});  // total 4
  EXPECT_EQ(SampleFromProbs(c, 0.0), 0);
  EXPECT_EQ(SampleFromProbs(c, 0.2499), 0);
  EXPECT_EQ(SampleFromProbs(c, 0.25), 2);  // never the zero-mass id 1
  EXPECT_EQ(SampleFromProbs(c, 0.9999999), 2);
}

TEST(UniformDoubleTest, StaysInUnitIntervalAndIsSeedDeterministic) {
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 1000; ++i) {
    const double u = UniformDouble(a);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(u, UniformDouble(b));
  }
}

// --- Sampler -------------------------------------------------------------------------------------

TEST(SamplerTest, GreedyIsArgmax) {
  Sampler s(Params(0.0f), 5);
  const std::vector<float> logits = {0.0f, 1.0f, 7.0f, 3.0f, 6.9f};
  EXPECT_EQ(s.Sample(logits.data(), {}), 2);
}

TEST(SamplerTest, GreedyTiesGoToLowestId) {
  Sampler s(Params(0.0f), 4);
  const std::vector<float> logits = {1.0f, 4.0f, 4.0f, 4.0f};
  EXPECT_EQ(s.Sample(logits.data(), {}), 1);
}

TEST(SamplerTest, GreedyIgnoresFiltersButAppliesRepetitionPenalty) {
  SamplingParams p = Params(0.0f);
  p.top_k = 1;
  p.top_p = 0.1f;
  p.min_p = 0.9f;
  p.repetition_penalty = 4.0f;
  Sampler s(p, 3);
  const std::vector<float> logits = {2.0f, 1.0f, -1.0f};
  const std::vector<int32_t> history = {0};
  EXPECT_EQ(s.Sample(logits.data(), {}), 0);
  EXPECT_EQ(s.Sample(logits.data(), history), 1);  // 2/4 = 0.5 < 1
}

TEST(SamplerTest, PenaltyOnNegativeLogitMakesItLessLikely) {
  SamplingParams p = Params(0.0f);
  p.repetition_penalty = 2.0f;
  Sampler s(p, 2);
  const std::vector<float> logits = {-1.0f, -1.5f};
  const std::vector<int32_t> history = {0};
  EXPECT_EQ(s.Sample(logits.data(), history), 1);  // -1 * 2 = -2 < -1.5
}

TEST(SamplerTest, SampleDoesNotModifyLogits) {
  SamplingParams p = Params(0.8f, 3);
  p.repetition_penalty = 1.3f;
  p.top_k = 2;
  Sampler s(p, 3);
  const std::vector<float> logits = {1.0f, 2.0f, -3.0f};
  const auto copy = logits;
  const std::vector<int32_t> history = {0, 1, 2};
  (void)s.Sample(logits.data(), history);
  EXPECT_EQ(logits, copy);
}

TEST(SamplerTest, TopKOneIsGreedyAtAnyTemperature) {
  const std::vector<float> logits = {0.3f, 0.1f, 0.35f, 0.2f, 0.35f};
  for (const float t : {0.5f, 1.0f, 5.0f, 100.0f}) {
    SamplingParams p = Params(t, 7);
    p.top_k = 1;
    Sampler s(p, 5);
    for (int i = 0; i < 50; ++i) ASSERT_EQ(s.Sample(logits.data(), {}), 2) << "t=" << t;
  }
}

TEST(SamplerTest, TopPKeepsOnlyTheNucleus) {
  // softmax([3, 2, 0, -1]) ≈ [0.705, 0.259, 0.035, 0.013]: top_p 0.9 keeps ids 0 and 1.
  SamplingParams p = Params(1.0f, 11);
  p.top_p = 0.9f;
  Sampler s(p, 4);
  const std::vector<float> logits = {3.0f, 2.0f, 0.0f, -1.0f};
  int counts[4] = {};
  for (int i = 0; i < 2000; ++i) ++counts[s.Sample(logits.data(), {})];
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_GT(counts[1], 0);
}

TEST(SamplerTest, MinPDropsUnlikelyTokens) {
  // p ≈ [0.665, 0.245, 0.090]; min_p 0.2 → threshold 0.133 drops id 2 only.
  SamplingParams p = Params(1.0f, 5);
  p.min_p = 0.2f;
  Sampler s(p, 3);
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
  int counts[3] = {};
  for (int i = 0; i < 2000; ++i) ++counts[s.Sample(logits.data(), {})];
  EXPECT_EQ(counts[2], 0);
  EXPECT_GT(counts[1], 0);
}

std::vector<int32_t> Draw(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.Sample(logits.data(), {}));
  return out;
}

TEST(SamplerTest, SameSeedGivesSameSequenceAndDifferentSeedsDiffer) {
  const std::vector<float> logits = {0.0f, 0.5f, 1.0f, 0.2f, 0.8f, 0.1f, 0.3f, 0.9f};
  Sampler a(Params(1.0f, 1234), 8), b(Params(1.0f, 1234), 8), c(Params(1.0f, 4321), 8);
  const auto seq_a = Draw(a, logits, 200);
  EXPECT_EQ(seq_a, Draw(b, logits, 200));
  EXPECT_NE(seq_a, Draw(c, logits, 200));
}

TEST(SamplerTest, ReseedRestartsTheSequence) {
  const std::vector<float> logits = {0.0f, 0.5f, 1.0f, 0.2f};
  Sampler s(Params(1.0f, 99), 4);
  const auto first = Draw(s, logits, 100);
  s.Reseed(99);
  EXPECT_EQ(Draw(s, logits, 100), first);
}

// Pins the exact output for one seed: mt19937_64 and the 53-bit conversion are fully specified,
// so this must hold on every platform and compiler. A change here breaks reproducibility of
// every seeded run.
TEST(SamplerTest, SeededSequenceIsPinned) {
  const std::vector<float> logits = {0.0f, 0.5f, 1.0f, 0.2f};
  Sampler s(Params(1.0f, 2024), 4);
  std::mt19937_64 rng(2024);
  const auto probs = SoftmaxOf(logits);
  for (int i = 0; i < 50; ++i) {
    // Recompute the expected draw by hand from the raw engine output.
    const double u = static_cast<double>(rng() >> 11) / 9007199254740992.0;
    double cumulative = 0.0;
    int32_t expected = 3;
    for (int32_t id = 0; id < 4; ++id) {
      cumulative += probs[id];
      if (u < cumulative) {
        expected = id;
        break;
      }
    }
    ASSERT_EQ(s.Sample(logits.data(), {}), expected) << "draw " << i;
  }
}

TEST(SamplerTest, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f};
  Sampler s(Params(1.0f, 2025), 6);
  const int n = 20000;
  std::vector<int> counts(6);
  for (int i = 0; i < n; ++i) ++counts[s.Sample(logits.data(), {})];
  const auto expected = SoftmaxOf(logits);
  for (int id = 0; id < 6; ++id) {
    EXPECT_NEAR(static_cast<double>(counts[id]) / n, expected[id], 0.02) << "id " << id;
  }
}

TEST(SamplerTest, TemperatureSharpensAndFlattens) {
  const std::vector<float> logits = {1.0f, 0.0f};
  const int n = 20000;
  for (const float t : {0.5f, 2.0f}) {
    Sampler s(Params(t, 8), 2);
    int zeros = 0;
    for (int i = 0; i < n; ++i) zeros += s.Sample(logits.data(), {}) == 0;
    const double expected = 1.0 / (1.0 + std::exp(-1.0 / t));
    EXPECT_NEAR(static_cast<double>(zeros) / n, expected, 0.02) << "t=" << t;
  }
}

// --- Validate ------------------------------------------------------------------------------------

std::string ValidateMessage(const SamplingParams& p, int32_t vocab = 10) {
  const Status st = Sampler(p, vocab).Validate();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  return st.message();
}

TEST(SamplerValidateTest, DefaultsAreValid) {
  EXPECT_TRUE(Sampler(SamplingParams{}, 10).Validate().ok());
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.repetition_penalty = 1.1f;
  EXPECT_TRUE(Sampler(p, 10).Validate().ok());
}

TEST(SamplerValidateTest, ErrorsNameParameterAndValue) {
  SamplingParams p;
  p.temperature = -0.5f;
  EXPECT_THAT(ValidateMessage(p), AllOf(HasSubstr("temperature"), HasSubstr("-0.5")));
  p = {};
  p.temperature = NAN;
  EXPECT_THAT(ValidateMessage(p), AllOf(HasSubstr("temperature"), HasSubstr("nan")));
  p = {};
  p.top_p = 0.0f;
  EXPECT_THAT(ValidateMessage(p), AllOf(HasSubstr("top_p"), HasSubstr("got 0")));
  p = {};
  p.top_p = 1.5f;
  EXPECT_THAT(ValidateMessage(p), AllOf(HasSubstr("top_p"), HasSubstr("1.5")));
  p = {};
  p.min_p = -0.1f;
  EXPECT_THAT(ValidateMessage(p), AllOf(HasSubstr("min_p"), HasSubstr("-0.1")));
  p = {};
  p.min_p = 2.0f;
  EXPECT_THAT(ValidateMessage(p), AllOf(HasSubstr("min_p"), HasSubstr("2")));
  p = {};
  p.top_k = -3;
  EXPECT_THAT(ValidateMessage(p), AllOf(HasSubstr("top_k"), HasSubstr("-3")));
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_THAT(ValidateMessage(p), AllOf(HasSubstr("repetition_penalty"), HasSubstr("got 0")));
  EXPECT_THAT(ValidateMessage(SamplingParams{}, 0), HasSubstr("vocab_size"));
}

}  // namespace
}  // namespace slm::llm
