#include "llm/stats.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <vector>

namespace slm::llm {
namespace {

GenerationStats Example() {
  GenerationStats s;
  s.load_ms = 3.14;
  s.ttft_ms = 4.2;
  s.prefill_ms = 10.0;
  s.decode_ms = 510.0;
  s.prompt_tokens = 12;
  s.prefill_tokens_computed = 12;
  s.generated_tokens = 256;
  s.peak_rss_bytes = 12 * 1024 * 1024 + 300 * 1024;  // 12.29 MiB
  return s;
}

TEST(GenerationStatsTest, PrefillRateCountsPromptTokens) {
  GenerationStats s = Example();
  s.prefill_tokens_computed = 4;  // most of the prompt came from a reused cache
  EXPECT_DOUBLE_EQ(s.prefill_tok_per_s(), 1200.0);
}

TEST(GenerationStatsTest, DecodeRateExcludesTheFirstTokenWhichCameFromPrefill) {
  const GenerationStats s = Example();
  EXPECT_EQ(s.decode_calls(), 255);
  EXPECT_DOUBLE_EQ(s.decode_tok_per_s(), 500.0);  // 255 calls in 510 ms
}

TEST(GenerationStatsTest, RatesAreZeroWithNothingToDivide) {
  GenerationStats s;
  EXPECT_EQ(s.prefill_tok_per_s(), 0.0);
  EXPECT_EQ(s.decode_tok_per_s(), 0.0);
  s.generated_tokens = 1;  // one token: no decode call
  s.decode_ms = 5.0;
  EXPECT_EQ(s.decode_calls(), 0);
  EXPECT_EQ(s.decode_tok_per_s(), 0.0);
  s.prompt_tokens = 8;  // tokens but no time
  EXPECT_EQ(s.prefill_tok_per_s(), 0.0);
}

TEST(GenerationStatsTest, ToTextIsOneHumanLine) {
  EXPECT_EQ(Example().ToText(),
            "load 3.1 ms | ttft 4.2 ms | prefill 1200.0 tok/s (12 tok) | "
            "decode 500.0 tok/s (255 tok) | peak RSS 12.3 MiB");
}

TEST(GenerationStatsTest, ToJsonHasEveryFieldAndRate) {
  const nlohmann::json j = Example().ToJson();
  EXPECT_DOUBLE_EQ(j.at("load_ms").get<double>(), 3.14);
  EXPECT_DOUBLE_EQ(j.at("ttft_ms").get<double>(), 4.2);
  EXPECT_DOUBLE_EQ(j.at("prefill_ms").get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j.at("decode_ms").get<double>(), 510.0);
  EXPECT_EQ(j.at("prompt_tokens").get<int64_t>(), 12);
  EXPECT_EQ(j.at("prefill_tokens_computed").get<int64_t>(), 12);
  EXPECT_EQ(j.at("generated_tokens").get<int64_t>(), 256);
  EXPECT_EQ(j.at("peak_rss_bytes").get<int64_t>(), 12 * 1024 * 1024 + 300 * 1024);
  EXPECT_DOUBLE_EQ(j.at("prefill_tok_per_s").get<double>(), 1200.0);
  EXPECT_DOUBLE_EQ(j.at("decode_tok_per_s").get<double>(), 500.0);
  EXPECT_EQ(j.size(), 10u);
}

TEST(PeakRssTest, IsPositiveAndAtLeastWhatWeTouched) {
  // Touch 32 MiB so the peak is known to be at least that large.
  std::vector<char> block(32 << 20, 1);
  EXPECT_GE(PeakRssBytes(), static_cast<int64_t>(block.size()));
}

TEST(StopwatchTest, ElapsedIsNonNegativeAndMonotonic) {
  Stopwatch w;
  const double a = w.elapsed_ms();
  const double b = w.elapsed_ms();
  EXPECT_GE(a, 0.0);
  EXPECT_GE(b, a);
  w.Restart();
  EXPECT_GE(w.elapsed_ms(), 0.0);
}

}  // namespace
}  // namespace slm::llm
