#include "model/model_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "io/safetensors.h"
#include "model_spec_test_util.h"
#include "test_util.h"

namespace slm::model {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using slm::testing::ParseError;

const std::string kModels = slm::testing::SharedDir() + "/models";

ModelSpec MustLoad(const std::string& dir) {
  auto spec = LoadModelSpec(dir);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : ModelSpec{};
}

// The smallest config transformers accepts for this class, all else default.
json MinimalLlamaConfig() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"vocab_size", 100}};
}

// --- the shared checkpoints ------------------------------------------------------------------

TEST(LoadModelSpec, Stories260K) {
  ModelSpec s = MustLoad(kModels + "/stories260K");
  EXPECT_EQ(s.architecture, "LlamaForCausalLM");
  EXPECT_EQ(s.model_type, "llama");
  EXPECT_EQ(s.hidden_size, 64);
  EXPECT_EQ(s.intermediate_size, 172);
  EXPECT_EQ(s.num_layers, 5);
  EXPECT_EQ(s.num_heads, 8);
  EXPECT_EQ(s.num_kv_heads, 4);
  EXPECT_EQ(s.head_dim, 8);
  EXPECT_EQ(s.vocab_size, 512);
  EXPECT_EQ(s.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(s.rms_norm_eps, 1e-5);
  EXPECT_TRUE(s.tie_word_embeddings);
  EXPECT_FALSE(s.attention_bias);
  EXPECT_FALSE(s.mlp_bias);
  EXPECT_EQ(s.hidden_act, "silu");
  EXPECT_DOUBLE_EQ(s.rope.theta, 10000.0);
  EXPECT_EQ(s.rope.rotary_dim, 8);
  EXPECT_EQ(s.rope.scaling, RopeScalingType::kNone);
  EXPECT_EQ(s.bos_id, 1);
  EXPECT_THAT(s.eos_ids, ElementsAre(2));
  EXPECT_FALSE(s.pad_id.has_value());
  EXPECT_TRUE(s.add_bos);
  EXPECT_EQ(s.generation_defaults, (json{{"bos_token_id", 1}, {"eos_token_id", 2}, {"do_sample", false}}));
  EXPECT_EQ(s.chat_template, "");
  EXPECT_EQ(s.LmHeadName(), "model.embed_tokens.weight");  // tied
}

TEST(LoadModelSpec, ZooLlamaHasLlama3RopeScaling) {
  ModelSpec s = MustLoad(kModels + "/zoo/llama");
  EXPECT_EQ(s.hidden_size, 128);
  EXPECT_EQ(s.num_heads, 4);
  EXPECT_EQ(s.num_kv_heads, 1);
  EXPECT_EQ(s.head_dim, 32);
  EXPECT_DOUBLE_EQ(s.rope.theta, 500000.0);
  EXPECT_EQ(s.rope.rotary_dim, 32);
  EXPECT_EQ(s.rope.scaling, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(s.rope.factor, 32.0);
  EXPECT_DOUBLE_EQ(s.rope.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(s.rope.high_freq_factor, 4.0);
  EXPECT_EQ(s.rope.original_max_position_embeddings, 32);
  EXPECT_TRUE(s.tie_word_embeddings);
}

TEST(LoadModelSpec, ZooLlama2IsUntiedAndDefaultsRopeTheta) {
  ModelSpec s = MustLoad(kModels + "/zoo/llama2");
  EXPECT_FALSE(s.tie_word_embeddings);
  EXPECT_EQ(s.LmHeadName(), "lm_head.weight");
  EXPECT_DOUBLE_EQ(s.rope.theta, 10000.0);  // no rope_theta key
  EXPECT_EQ(s.head_dim, 16);                // no head_dim key: 64 / 4
  EXPECT_FALSE(s.attention_bias);           // no attention_bias key
  EXPECT_EQ(s.pad_id, 0);                   // from generation_config.json only
  EXPECT_EQ(s.generation_defaults.value("pad_token_id", -1), 0);
}

// Every name the spec hands out exists in the checkpoint with the shape the graph expects.
TEST(LoadModelSpec, WeightNamesMatchTheCheckpoints) {
  for (const char* family : {"stories260K", "zoo/llama", "zoo/llama2"}) {
    SCOPED_TRACE(family);
    const std::string dir = kModels + "/" + family;
    ModelSpec s = MustLoad(dir);
    auto ckpt = io::SafetensorsCheckpoint::OpenDir(dir);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
    const int64_t D = s.hidden_size, F = s.intermediate_size, hd = s.head_dim;
    std::vector<std::pair<std::string, Shape>> expected = {
        {s.EmbedName(), {s.vocab_size, D}},
        {s.LmHeadName(), {s.vocab_size, D}},
        {s.FinalNormName(), {D}},
    };
    for (int64_t i = 0; i < s.num_layers; ++i) {
      expected.insert(expected.end(), {
          {s.LayerWeight(i, "input_layernorm.weight"), {D}},
          {s.LayerWeight(i, "self_attn.q_proj.weight"), {s.num_heads * hd, D}},
          {s.LayerWeight(i, "self_attn.k_proj.weight"), {s.num_kv_heads * hd, D}},
          {s.LayerWeight(i, "self_attn.v_proj.weight"), {s.num_kv_heads * hd, D}},
          {s.LayerWeight(i, "self_attn.o_proj.weight"), {D, s.num_heads * hd}},
          {s.LayerWeight(i, "post_attention_layernorm.weight"), {D}},
          {s.LayerWeight(i, "mlp.gate_proj.weight"), {F, D}},
          {s.LayerWeight(i, "mlp.up_proj.weight"), {F, D}},
          {s.LayerWeight(i, "mlp.down_proj.weight"), {D, F}},
      });
    }
    for (const auto& [name, shape] : expected) {
      const io::TensorInfo* t = ckpt->Find(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(t->shape, shape) << name;
    }
    // Tied checkpoints store no lm_head; every stored tensor is one the graph uses.
    EXPECT_EQ(ckpt->size(), 3 + 9 * s.num_layers - (s.tie_word_embeddings ? 1 : 0));
  }
}

TEST(ModelSpecNames, LayerWeightsFollowHuggingFaceNaming) {
  ModelSpec s;
  EXPECT_EQ(s.EmbedName(), "model.embed_tokens.weight");
  EXPECT_EQ(s.FinalNormName(), "model.norm.weight");
  EXPECT_EQ(s.LayerPrefix(12), "model.layers.12");
  EXPECT_EQ(s.LayerWeight(3, "self_attn.q_proj.weight"), "model.layers.3.self_attn.q_proj.weight");
}

TEST(ParseModelSpec, OtherArchitecturesAreUnsupportedNamingThemAndTheFile) {
  json config = MinimalLlamaConfig();
  config["architectures"] = {"GPTNeoXForCausalLM"};
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("test/config.json"));
  EXPECT_THAT(s.message(), HasSubstr("'GPTNeoXForCausalLM'"));
  EXPECT_THAT(s.message(), HasSubstr("supported: LlamaForCausalLM, MistralForCausalLM"));
}

class TempDir {
 public:
  void Write(const std::string& name, const std::string& text) const {
    slm::testing::WriteFile(path_ + "/" + name, text);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_ = slm::testing::MakeTempDir("model-spec");
};

TEST(LoadModelSpec, MissingConfigIsNotFoundNamingThePath) {
  TempDir dir;
  auto spec = LoadModelSpec(dir.path());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(spec.status().message(), HasSubstr(dir.path() + "/config.json"));
}

TEST(LoadModelSpec, MissingDirectoryIsNotFound) {
  auto spec = LoadModelSpec("/nonexistent/slm-model");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(spec.status().message(), HasSubstr("/nonexistent/slm-model"));
}

TEST(LoadModelSpec, ReadsTokenizerConfigAndAJinjaChatTemplate) {
  TempDir dir;
  dir.Write("config.json", MinimalLlamaConfig().dump());
  dir.Write("tokenizer_config.json", R"({"add_bos_token": false})");
  dir.Write("chat_template.jinja", "{{ messages }}");
  ModelSpec s = MustLoad(dir.path());
  EXPECT_FALSE(s.add_bos);
  EXPECT_EQ(s.chat_template, "{{ messages }}");
  EXPECT_EQ(s.generation_defaults, json::object());  // no generation_config.json
}

TEST(LoadModelSpec, BadGenerationConfigIsReportedWithItsPath) {
  TempDir dir;
  dir.Write("config.json", MinimalLlamaConfig().dump());
  dir.Write("generation_config.json", R"({"eos_token_id": "</s>"})");
  auto spec = LoadModelSpec(dir.path());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(),
              HasSubstr("generation_config.json: field 'eos_token_id' is a string (\"</s>\")"));
}

// --- ParseModelSpec: defaults and validation -------------------------------------------------

TEST(ParseModelSpec, AbsentKeysTakeLlamaConfigDefaults) {
  auto spec = ParseModelSpec(MinimalLlamaConfig(), "config.json");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->model_type, "llama");
  EXPECT_EQ(spec->num_kv_heads, 4);
  EXPECT_EQ(spec->head_dim, 16);
  EXPECT_EQ(spec->max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(spec->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(spec->rope.theta, 10000.0);
  EXPECT_EQ(spec->rope.rotary_dim, 16);
  EXPECT_EQ(spec->rope.scaling, RopeScalingType::kNone);
  EXPECT_FALSE(spec->tie_word_embeddings);
  EXPECT_FALSE(spec->attention_bias);
  EXPECT_FALSE(spec->mlp_bias);
  EXPECT_EQ(spec->hidden_act, "silu");
  EXPECT_EQ(spec->bos_id, 1);
  EXPECT_THAT(spec->eos_ids, ElementsAre(2));
  EXPECT_FALSE(spec->pad_id.has_value());
}

TEST(ParseModelSpec, ArchitectureComesFromModelTypeWhenTheListIsAbsent) {
  json config = MinimalLlamaConfig();
  config.erase("architectures");
  config["model_type"] = "llama";
  auto spec = ParseModelSpec(config, "config.json");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->architecture, "LlamaForCausalLM");
}

TEST(ParseModelSpec, SpecialIdsMayBeListsOrNull) {
  json config = MinimalLlamaConfig();
  config["eos_token_id"] = {2, 7};
  config["bos_token_id"] = nullptr;
  config["pad_token_id"] = 0;
  auto spec = ParseModelSpec(config, "config.json");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_THAT(spec->eos_ids, ElementsAre(2, 7));
  EXPECT_FALSE(spec->bos_id.has_value());
  EXPECT_EQ(spec->pad_id, 0);

  config["eos_token_id"] = nullptr;
  config["pad_token_id"] = -1;  // early Llama conversions: no pad
  spec = ParseModelSpec(config, "config.json");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->eos_ids.empty());
  EXPECT_FALSE(spec->pad_id.has_value());
}

TEST(ParseModelSpec, GenerationConfigOverridesOnlyTheIdsItSets) {
  auto spec = ParseModelSpec(MinimalLlamaConfig(), "config.json");
  ASSERT_TRUE(spec.ok());
  json generation = {{"eos_token_id", {2, 9}}, {"bos_token_id", nullptr}, {"temperature", 0.6}};
  ASSERT_TRUE(ApplyGenerationConfig(generation, "generation_config.json", &*spec).ok());
  EXPECT_THAT(spec->eos_ids, ElementsAre(2, 9));
  EXPECT_EQ(spec->bos_id, 1);  // null: not set, config.json's stays
  EXPECT_EQ(spec->generation_defaults, generation);
}

TEST(ParseModelSpec, TokenizerConfigChatTemplateStringOrNamedList) {
  ModelSpec s;
  ASSERT_TRUE(ApplyTokenizerConfig(json{{"chat_template", "T"}}, "tokenizer_config.json", &s).ok());
  EXPECT_EQ(s.chat_template, "T");
  EXPECT_TRUE(s.add_bos);
  json named = {{"chat_template",
                 {{{"name", "tool_use"}, {"template", "X"}}, {{"name", "default"}, {"template", "D"}}}}};
  ASSERT_TRUE(ApplyTokenizerConfig(named, "tokenizer_config.json", &s).ok());
  EXPECT_EQ(s.chat_template, "D");
  Status bad = ApplyTokenizerConfig(json{{"chat_template", 3}}, "tokenizer_config.json", &s);
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("field 'chat_template' is an integer (3)"));
}

TEST(ParseModelSpec, RopeScalingAcceptsTheLegacyTypeKey) {
  json config = MinimalLlamaConfig();
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  auto spec = ParseModelSpec(config, "config.json");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->rope.scaling, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(spec->rope.factor, 4.0);
}

TEST(ParseModelSpec, RopeParametersOfTransformersV5AreRead) {
  json config = MinimalLlamaConfig();
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  auto spec = ParseModelSpec(config, "config.json");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->rope.scaling, RopeScalingType::kNone);
  EXPECT_DOUBLE_EQ(spec->rope.theta, 500000.0);
}

TEST(ParseModelSpec, PartialRotaryFactorShrinksTheRotaryDims) {
  json config = MinimalLlamaConfig();
  config["partial_rotary_factor"] = 0.75;
  auto spec = ParseModelSpec(config, "config.json");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->rope.rotary_dim, 12);  // int(16 * 0.75)
}

TEST(ParseModelSpec, UnsupportedRopeTypeNamesIt) {
  json config = MinimalLlamaConfig();
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("field 'rope_scaling.rope_type' is 'yarn'"));
  EXPECT_THAT(s.message(), HasSubstr("supported: default, linear, llama3, longrope"));
}

TEST(ParseModelSpec, RopeScalingWithoutATypeOrFactorIsRejected) {
  json config = MinimalLlamaConfig();
  config["rope_scaling"] = {{"factor", 4.0}};
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rope_scaling.rope_type' is missing"));

  config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}};
  s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("'rope_scaling.original_max_position_embeddings' is missing"));

  config["rope_scaling"]["original_max_position_embeddings"] = 8192;
  config["rope_scaling"]["high_freq_factor"] = 1.0;  // the smoothing band would be empty
  s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("low_freq_factor < high_freq_factor"));
}

TEST(ParseModelSpec, IllTypedOrNonPositiveFieldsNameFieldAndValue) {
  json config = MinimalLlamaConfig();
  config["hidden_size"] = "64";
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("test/config.json: field 'hidden_size' is a string (\"64\"), "
                                     "expected an integer"));

  config = MinimalLlamaConfig();
  config["num_hidden_layers"] = 0;
  s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("field 'num_hidden_layers' is 0"));

  config = MinimalLlamaConfig();
  config["rms_norm_eps"] = -1e-5;
  s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("field 'rms_norm_eps' is a number (-1e-05)"));

  config = MinimalLlamaConfig();
  config["tie_word_embeddings"] = "yes";
  s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("field 'tie_word_embeddings' is a string"));

  config = MinimalLlamaConfig();
  config["eos_token_id"] = 100;  // vocab_size is 100
  s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("field 'eos_token_id' is 100, expected a token id in [0, 100)"));
}

TEST(ParseModelSpec, HeadsMustBeAMultipleOfKvHeads) {
  json config = MinimalLlamaConfig();
  config["num_key_value_heads"] = 3;
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("num_attention_heads 4 is not a multiple of num_key_value_heads 3"));
}

TEST(ParseModelSpec, MissingSizeIsNotFoundNamingTheField) {
  json config = MinimalLlamaConfig();
  config.erase("vocab_size");
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("field 'vocab_size' is missing"));
}

TEST(ParseModelSpec, OtherActivationsAreUnsupported) {
  json config = MinimalLlamaConfig();
  config["hidden_act"] = "gelu";
  Status s = ParseError(config);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("'hidden_act' is 'gelu'"));
}

TEST(ParseModelSpec, ConfigThatIsNotAnObjectIsRejected) {
  Status s = ParseError(json::array());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("test/config.json"));
}

}  // namespace
}  // namespace slm::model
