// Per-family facts read from config.json (the family table in model_spec.cc) and the cache
// layout they give: checked against the zoo checkpoints and what the goldens record about how
// transformers built each model (golden/zoo/<family>.json: sliding_window, layer_types).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "io/json_util.h"
#include "model/graph_builder.h"
#include "model/model_spec.h"
#include "model/rope.h"
#include "model_spec_test_util.h"
#include "test_util.h"

namespace slm::model {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using slm::testing::ParseError;

const std::string kZoo = slm::testing::SharedDir() + "/models/zoo";
const std::string kGolden = slm::testing::SharedDir() + "/golden/zoo";

ModelSpec Zoo(const std::string& family) {
  auto spec = LoadModelSpec(kZoo + "/" + family);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : ModelSpec{};
}

json Golden(const std::string& family) {
  auto j = io::ReadJsonFile(kGolden + "/" + family + ".json");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : json::object();
}

json ZooConfig(const std::string& family) {
  auto j = io::ReadJsonFile(kZoo + "/" + family + "/config.json");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : json::object();
}

// --- sliding layers match what transformers built ----------------------------------------------

// The goldens record effective_layer_types for Gemma 2/3 and sliding_window for the rest.
TEST(FamilySpec, SlidingLayersMatchTheLayersTransformersBuilt) {
  for (const char* family : {"gemma2", "gemma3"}) {
    SCOPED_TRACE(family);
    const ModelSpec s = Zoo(family);
    const json types = Golden(family)["layer_types"]["effective_layer_types"];
    const int64_t window = Golden(family)["sliding_window"].get<int64_t>();
    ASSERT_EQ(static_cast<int64_t>(types.size()), s.num_layers);
    for (int64_t i = 0; i < s.num_layers; ++i) {
      EXPECT_EQ(s.layer_window[i], types[i] == "sliding_attention" ? window : 0) << "layer " << i;
    }
  }
  // Mistral and Phi-3 slide on every layer.
  for (const char* family : {"mistral", "phi3", "phi4mini"}) {
    SCOPED_TRACE(family);
    const ModelSpec s = Zoo(family);
    const int64_t window = Golden(family)["sliding_window"].get<int64_t>();
    EXPECT_EQ(s.layer_window, std::vector<int64_t>(s.num_layers, window));
  }
  // Qwen's sliding_window is inactive while use_sliding_window is false; Llama/Gemma never slide.
  for (const char* family : {"qwen2", "qwen3", "llama", "llama2", "gemma"}) {
    SCOPED_TRACE(family);
    const ModelSpec s = Zoo(family);
    EXPECT_EQ(s.layer_window, std::vector<int64_t>(s.num_layers, 0));
  }
}

TEST(FamilySpec, QwenSlidesFromMaxWindowLayersWhenEnabled) {
  json config = ZooConfig("qwen2");  // 4 layers, max_window_layers 3, sliding_window 512
  config["use_sliding_window"] = true;
  auto s = ParseModelSpec(config, "qwen2/config.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_THAT(s->layer_window, ElementsAre(0, 0, 0, 512));
}

TEST(FamilySpec, ExplicitLayerTypesOverrideTheFamilyRule) {
  json config = ZooConfig("gemma2");
  config["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention",
                           "full_attention"};
  auto s = ParseModelSpec(config, "gemma2/config.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_THAT(s->layer_window, ElementsAre(0, 8, 8, 0));
}

TEST(FamilySpec, UnknownLayerTypeIsUnsupportedNamingIt) {
  json config = ZooConfig("gemma3");
  config["layer_types"] = json::array();
  for (int i = 0; i < 6; ++i) config["layer_types"].push_back("full_attention");
  config["layer_types"][2] = "chunked_attention";
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("'layer_types' element 2 is 'chunked_attention'"));
}

TEST(FamilySpec, LayerTypesOfTheWrongLengthAreRejected) {
  json config = ZooConfig("gemma2");
  config["layer_types"] = {"full_attention"};
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("expected a list of 4 layer types"));
}

// --- structure flags ---------------------------------------------------------------------------

TEST(FamilySpec, LlamaKeepsPlainStructure) {
  const ModelSpec s = Zoo("llama");
  EXPECT_FALSE(s.qkv_bias || s.o_bias || s.fused_qkv || s.qk_norm || s.norm_add_one ||
               s.scale_embeddings || s.sandwich_norms);
  EXPECT_EQ(s.hidden_act, "silu");
  EXPECT_DOUBLE_EQ(s.attn_scale, 1.0 / std::sqrt(32.0));
  EXPECT_EQ(s.attn_softcap, 0);
  EXPECT_EQ(s.final_softcap, 0);
}

TEST(FamilySpec, Qwen2HasQkvBiasButNoOutputBias) {
  const ModelSpec s = Zoo("qwen2");
  EXPECT_TRUE(s.qkv_bias);
  EXPECT_FALSE(s.o_bias);
  EXPECT_TRUE(s.tie_word_embeddings);
}

TEST(FamilySpec, Qwen3HasPerHeadQkNormAndExplicitHeadDim) {
  const ModelSpec s = Zoo("qwen3");
  EXPECT_TRUE(s.qk_norm);
  EXPECT_FALSE(s.norm_add_one);
  EXPECT_EQ(s.head_dim, 32);  // explicit; hidden_size / heads would be 16
  EXPECT_FALSE(s.qkv_bias);
}

TEST(FamilySpec, GemmaScalesEmbeddingsAndUsesOnePlusWeightNorms) {
  const ModelSpec s = Zoo("gemma");
  EXPECT_TRUE(s.norm_add_one);
  EXPECT_TRUE(s.scale_embeddings);
  EXPECT_FALSE(s.sandwich_norms);
  EXPECT_EQ(s.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(s.tie_word_embeddings);  // GemmaConfig's default; the zoo config omits the key
}

TEST(FamilySpec, Gemma2SoftCapsAndScalesByQueryPreAttnScalar) {
  const ModelSpec s = Zoo("gemma2");
  EXPECT_TRUE(s.sandwich_norms);
  EXPECT_EQ(s.attn_softcap, 50.0);
  EXPECT_EQ(s.final_softcap, 30.0);
  EXPECT_DOUBLE_EQ(s.attn_scale, 0.25);  // 16 ** -0.5
  EXPECT_EQ(s.MlpNormSuffix(), "pre_feedforward_layernorm.weight");
  EXPECT_EQ(s.AttnOutNormSuffix(), "post_attention_layernorm.weight");
}

TEST(FamilySpec, Gemma3LocalLayersUseLocalBaseWithoutScaling) {
  const ModelSpec s = Zoo("gemma3");
  EXPECT_TRUE(s.qk_norm);
  EXPECT_TRUE(s.norm_add_one);
  EXPECT_EQ(s.attn_softcap, 0);
  EXPECT_EQ(s.final_softcap, 0);
  ASSERT_TRUE(s.local_rope.has_value());
  EXPECT_EQ(s.rope.scaling, RopeScalingType::kLinear);
  EXPECT_EQ(s.rope.factor, 8.0);
  EXPECT_EQ(s.rope.theta, 1e6);
  EXPECT_EQ(s.local_rope->scaling, RopeScalingType::kNone);
  EXPECT_EQ(s.local_rope->theta, 10000.0);
  EXPECT_EQ(&s.LayerRope(0), &*s.local_rope);  // sliding
  EXPECT_EQ(&s.LayerRope(5), &s.rope);         // global
}

TEST(FamilySpec, Phi3IsFusedWithoutBiases) {
  const ModelSpec s = Zoo("phi3");
  EXPECT_TRUE(s.fused_qkv);
  EXPECT_TRUE(s.fused_gate_up);
  EXPECT_FALSE(s.qkv_bias || s.o_bias);
  EXPECT_EQ(s.rope.scaling, RopeScalingType::kNone);
}

TEST(FamilySpec, Phi4MiniLongRopeWithPartialRotaryAndAttentionFactor) {
  const ModelSpec s = Zoo("phi4mini");
  EXPECT_EQ(s.rope.rotary_dim, 12);  // int(16 * 0.75)
  EXPECT_EQ(s.rope.scaling, RopeScalingType::kLongRope);
  EXPECT_EQ(s.rope.original_max_position_embeddings, 256);
  ASSERT_EQ(s.rope.short_factor.size(), 6u);
  ASSERT_EQ(s.rope.long_factor.size(), 6u);
  // max_position_embeddings / original = 512 / 256 = 2: sqrt(1 + ln 2 / ln 256).
  EXPECT_DOUBLE_EQ(s.rope.attention_factor, std::sqrt(1 + std::log(2.0) / std::log(256.0)));
  const RopeTables t = ComputeRopeTables(s.rope);
  EXPECT_FLOAT_EQ(t.attention_scaling, static_cast<float>(s.rope.attention_factor));
  // Both tables travel, so the whole max_position_embeddings context compiles.
  EXPECT_EQ(t.switch_len, 256);
  EXPECT_EQ(t.long_inv_freq.size(), t.inv_freq.size());
  EXPECT_EQ(LongestStaticContext(s), 512);
  EXPECT_TRUE(CheckContextSupported(s, 512).ok());
}

TEST(FamilySpec, LongRopeShortFactorsDivideTheFrequencies) {
  RopeSpec r;
  r.theta = 10000.0;
  r.rotary_dim = 4;
  r.scaling = RopeScalingType::kLongRope;
  r.short_factor = {2.0, 4.0};
  r.long_factor = {1.0, 1.0};
  r.original_max_position_embeddings = 16;
  const RopeTables t = ComputeRopeTables(r);
  ASSERT_EQ(t.inv_freq.size(), 2u);
  EXPECT_FLOAT_EQ(t.inv_freq[0], 0.5f);
  EXPECT_FLOAT_EQ(t.inv_freq[1], 1.0f / (4.0f * 100.0f));
  r.short_factor = {1.0};  // wrong length
  EXPECT_EQ(ValidateRopeSpec(r).code(), ErrorCode::kInvalidArgument);
}

// --- unsupported features are named ------------------------------------------------------------

// transformers: GemmaMLP reads hidden_act, Gemma2/3 MLPs read hidden_activation; "gelu" is
// ACT2FN's exact (erf) GELU.
TEST(FamilySpec, ExactGeluIsReadFromTheKeyEachGemmaFamilyUses) {
  json gemma = ZooConfig("gemma");
  gemma["hidden_act"] = "gelu";
  gemma["hidden_activation"] = "gelu_pytorch_tanh";  // ignored by GemmaMLP today
  auto s1 = ParseModelSpec(gemma, "gemma/config.json");
  ASSERT_TRUE(s1.ok()) << s1.status().ToString();
  EXPECT_EQ(s1->hidden_act, "gelu");
  for (const char* family : {"gemma2", "gemma3"}) {
    json config = ZooConfig(family);
    config["hidden_act"] = "gelu_pytorch_tanh";  // ignored by Gemma2/3 MLPs
    config["hidden_activation"] = "gelu";
    auto s = ParseModelSpec(config, std::string(family) + "/config.json");
    ASSERT_TRUE(s.ok()) << family << ": " << s.status().ToString();
    EXPECT_EQ(s->hidden_act, "gelu") << family;
  }
}

TEST(FamilySpec, OtherGeluVariantsAreUnsupportedForGemma2NamingTheKey) {
  json config = ZooConfig("gemma2");
  config["hidden_activation"] = "gelu_new";
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("'hidden_activation' is 'gelu_new'"));
  EXPECT_THAT(s.message(), HasSubstr("supported: gelu_pytorch_tanh, gelu"));
}

TEST(FamilySpec, LmHeadBiasIsUnsupported) {
  json config = ZooConfig("phi4mini");
  config["lm_head_bias"] = true;
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("lm_head_bias"));
}

TEST(FamilySpec, Gemma3TextModelTypeAloneSelectsGemma3) {
  json config = ZooConfig("gemma3");
  config.erase("architectures");
  auto s = ParseModelSpec(config, "gemma3/config.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->architecture, "Gemma3ForCausalLM");
}

// --- cache layout ------------------------------------------------------------------------------

TEST(CacheLayout, RingModeGivesSlidingLayersAWindowLongRing) {
  const ModelSpec s = Zoo("gemma2");
  const CacheLayout c = MakeCacheLayout(s, 128, SlidingMode::kRing);
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.groups[0].name, "full");
  EXPECT_EQ(c.groups[0].cache_len, 128);
  EXPECT_EQ(c.groups[0].window, 0);
  EXPECT_EQ(c.groups[1].name, "sliding");
  EXPECT_EQ(c.groups[1].cache_len, 8);
  EXPECT_EQ(c.groups[1].window, 8);
  std::vector<std::string> groups;
  for (const auto& l : c.layers) groups.push_back(l.group);
  EXPECT_THAT(groups, ElementsAre("sliding", "full", "sliding", "full"));
}

TEST(CacheLayout, FullLengthModeKeepsTheWindowButAMaxContextCache) {
  const CacheLayout c = MakeCacheLayout(Zoo("mistral"), 128, SlidingMode::kFullLength);
  ASSERT_EQ(c.groups.size(), 1u);  // every Mistral layer slides: no "full" group
  EXPECT_EQ(c.groups[0].name, "sliding");
  EXPECT_EQ(c.groups[0].cache_len, 128);
  EXPECT_EQ(c.groups[0].window, 12);
}

TEST(CacheLayout, WindowNoShorterThanTheContextIsFullAttention) {
  // Phi-4-mini's window of 1024 cannot hide anything in a 256-token context.
  const CacheLayout c = MakeCacheLayout(Zoo("phi4mini"), 256);
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.groups[0].name, "full");
  for (const auto& l : c.layers) EXPECT_EQ(l.group, "full");
}

TEST(CacheLayout, SlidingModeNamesParse) {
  EXPECT_EQ(*ParseSlidingMode("ring"), SlidingMode::kRing);
  EXPECT_EQ(*ParseSlidingMode("full-length"), SlidingMode::kFullLength);
  auto bad = ParseSlidingMode("full");
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("'full'"));
}

}  // namespace
}  // namespace slm::model
