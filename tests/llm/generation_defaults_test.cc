// generation_config.json → the defaults `staticlm run` generates with (transformers'
// GenerationConfig semantics).
#include "llm/generation_defaults.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace slm::llm {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

GenerationDefaults Parse(const json& j) {
  auto g = ParseGenerationDefaults(j, "generation_config.json");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : GenerationDefaults{};
}

TEST(GenerationDefaults, SamplingKeysApplyWhenDoSampleIsTrue) {
  SamplingParams p;
  ApplyGenerationDefaults(Parse({{"do_sample", true}, {"temperature", 0.6}, {"top_k", 20}, {"top_p", 0.9},
                                 {"min_p", 0.05}, {"repetition_penalty", 1.1}}),
                          &p);
  EXPECT_FLOAT_EQ(p.temperature, 0.6f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
}

TEST(GenerationDefaults, DoSampleWithoutValuesTakesTransformersDefaults) {
  SamplingParams p;
  ApplyGenerationDefaults(Parse({{"do_sample", true}}), &p);
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_k, 50);  // GenerationConfig.top_k defaults to 50
  EXPECT_FLOAT_EQ(p.top_p, 1.0f);
  EXPECT_FLOAT_EQ(p.min_p, 0.0f);
}

TEST(GenerationDefaults, WithoutDoSampleDecodingIsGreedyButRepetitionPenaltyStays) {
  for (const json& j : {json{{"temperature", 0.7}, {"top_k", 5}, {"repetition_penalty", 1.3}},
                        json{{"do_sample", false}, {"temperature", 0.7}, {"repetition_penalty", 1.3}}}) {
    SamplingParams p;
    p.temperature = 0.9f;
    ApplyGenerationDefaults(Parse(j), &p);
    EXPECT_EQ(p.temperature, 0.0f) << j.dump();
    EXPECT_EQ(p.top_k, 0) << j.dump();
    EXPECT_FLOAT_EQ(p.repetition_penalty, 1.3f) << j.dump();
  }
}

TEST(GenerationDefaults, MaxNewTokensThenMaxLengthMinusPromptThenFallback) {
  EXPECT_EQ(DefaultMaxNewTokens(Parse({{"max_new_tokens", 33}, {"max_length", 100}}), 10, 128), 33);
  EXPECT_EQ(DefaultMaxNewTokens(Parse({{"max_length", 100}}), 10, 128), 90);
  EXPECT_EQ(DefaultMaxNewTokens(Parse({{"max_length", 5}}), 10, 128), 0);
  EXPECT_EQ(DefaultMaxNewTokens(Parse(json::object()), 10, 128), 128);
  EXPECT_EQ(DefaultMaxNewTokens(Parse({{"max_new_tokens", nullptr}}), 10, 128), 128);  // null = unset
}

TEST(GenerationDefaults, IllTypedValuesAreRejectedNamingTheKey) {
  auto bad_temp = ParseGenerationDefaults({{"temperature", "hot"}}, "generation_config.json");
  ASSERT_FALSE(bad_temp.ok());
  EXPECT_EQ(bad_temp.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad_temp.status().message(), HasSubstr("generation_config.json: field 'temperature' is \"hot\""));
  auto bad_k = ParseGenerationDefaults({{"top_k", -1}}, "g.json");
  ASSERT_FALSE(bad_k.ok());
  EXPECT_THAT(bad_k.status().message(), HasSubstr("'top_k' is -1, expected an integer >= 0"));
  auto bad_sample = ParseGenerationDefaults({{"do_sample", 1}}, "g.json");
  ASSERT_FALSE(bad_sample.ok());
  EXPECT_THAT(bad_sample.status().message(), HasSubstr("'do_sample'"));
  EXPECT_FALSE(ParseGenerationDefaults({{"repetition_penalty", 0}}, "g.json").ok());
  EXPECT_FALSE(ParseGenerationDefaults(json::array(), "g.json").ok());
}

}  // namespace
}  // namespace slm::llm
