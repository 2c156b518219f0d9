// `staticlm gen-checkpoint`: the random-weight checkpoints behind the benchmark figures are
// well-formed Llama checkpoints of the asked shapes, reproducible from the seed, compile, and
// are written atomically (nothing half-written under the final names).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "e2e/artifacts.h"
#include "io/safetensors.h"

namespace slm::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kSmallShape[] = "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96 --vocab 300 --max-pos 128";

std::string Generate(const std::string& extra) {
  std::string dir = MakeTempDir("gen") + "/ckpt";
  CommandResult r = RunCli("gen-checkpoint -o " + dir + " " + kSmallShape + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir;
}

std::vector<std::string> TempFilesIn(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) found.push_back(e.path().string());
  }
  return found;
}

TEST(GenCheckpoint, WritesALlamaConfigOfTheAskedShape) {
  const std::string dir = Generate("--dtype f32");
  const nlohmann::json c = ReadJson(dir + "/config.json");
  EXPECT_EQ(c.at("model_type"), "llama");
  EXPECT_EQ(c.at("architectures").at(0), "LlamaForCausalLM");
  EXPECT_EQ(c.at("hidden_size"), 64);
  EXPECT_EQ(c.at("num_hidden_layers"), 2);
  EXPECT_EQ(c.at("num_attention_heads"), 4);
  EXPECT_EQ(c.at("num_key_value_heads"), 2);
  EXPECT_EQ(c.at("intermediate_size"), 96);
  EXPECT_EQ(c.at("vocab_size"), 300);
  EXPECT_EQ(c.at("max_position_embeddings"), 128);
  EXPECT_EQ(c.at("tie_word_embeddings"), false);
  EXPECT_EQ(c.at("torch_dtype"), "float32");
  EXPECT_TRUE(TempFilesIn(dir).empty());
}

TEST(GenCheckpoint, WritesEveryLlamaTensorWithItsShapeAndDistribution) {
  const std::string dir = Generate("--dtype f32");
  auto ckpt = io::SafetensorsCheckpoint::OpenDir(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  // embed, 9 per layer, final norm, lm_head
  EXPECT_EQ(ckpt->size(), 1u + 2 * 9 + 1 + 1);
  const int64_t head_dim = 64 / 4;
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"model.embed_tokens.weight", {300, 64}},
      {"model.layers.1.self_attn.q_proj.weight", {4 * head_dim, 64}},
      {"model.layers.1.self_attn.k_proj.weight", {2 * head_dim, 64}},
      {"model.layers.1.self_attn.v_proj.weight", {2 * head_dim, 64}},
      {"model.layers.1.self_attn.o_proj.weight", {64, 4 * head_dim}},
      {"model.layers.0.mlp.gate_proj.weight", {96, 64}},
      {"model.layers.0.mlp.up_proj.weight", {96, 64}},
      {"model.layers.0.mlp.down_proj.weight", {64, 96}},
      {"model.layers.0.input_layernorm.weight", {64}},
      {"model.layers.1.post_attention_layernorm.weight", {64}},
      {"model.norm.weight", {64}},
      {"lm_head.weight", {300, 64}},
  };
  for (const auto& [name, shape] : expected) {
    const io::TensorInfo* t = ckpt->Find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
    EXPECT_EQ(t->dtype, DType::kF32) << name;
  }
  std::vector<float> w(300 * 64);
  ASSERT_TRUE(io::SafetensorsCheckpoint::ReadAsF32(*ckpt->Find("lm_head.weight"), w.data()).ok());
  double sum = 0, sum_sq = 0;
  for (float v : w) sum += v, sum_sq += double(v) * v;
  const double mean = sum / double(w.size()), stddev = std::sqrt(sum_sq / double(w.size()) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(stddev, 0.02, 0.002);
  std::vector<float> norm(64);
  ASSERT_TRUE(io::SafetensorsCheckpoint::ReadAsF32(*ckpt->Find("model.norm.weight"), norm.data()).ok());
  for (float v : norm) EXPECT_EQ(v, 1.0f);
}

TEST(GenCheckpoint, TiedBf16CheckpointHasNoLmHead) {
  const std::string dir = Generate("--dtype bf16 --tie");
  EXPECT_EQ(ReadJson(dir + "/config.json").at("tie_word_embeddings"), true);
  auto ckpt = io::SafetensorsCheckpoint::OpenDir(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_EQ(ckpt->Find("lm_head.weight"), nullptr);
  ASSERT_NE(ckpt->Find("model.embed_tokens.weight"), nullptr);
  EXPECT_EQ(ckpt->Find("model.embed_tokens.weight")->dtype, DType::kBF16);
}

TEST(GenCheckpoint, SameSeedGivesTheSameWeightsAndAnotherSeedDoesNot) {
  const std::string a = Generate("--seed 7"), b = Generate("--seed 7"), c = Generate("--seed 8");
  EXPECT_EQ(ReadFile(a + "/model.safetensors"), ReadFile(b + "/model.safetensors"));
  EXPECT_NE(ReadFile(a + "/model.safetensors"), ReadFile(c + "/model.safetensors"));
}

TEST(GenCheckpoint, GeneratedCheckpointCompilesAndRuns) {
  const std::string dir = Generate("");
  const std::string slm = dir + "/m.slm";
  CommandResult compiled = RunCli("compile " + dir + " -o " + slm + " --max-context 64 --prefill-steps 8 --quant int4 --group 32");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  CommandResult bench = RunCli("bench " + slm + " -t 1 -p 8 -n 4 -r 1 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const nlohmann::json figures = nlohmann::json::parse(bench.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(figures.is_discarded()) << bench.out;
  EXPECT_GT(figures.value("decode_tok_s", nlohmann::json::object()).value("median", 0.0), 0.0) << bench.out;
  EXPECT_GT(figures.value("decode_weight_bytes", 0), 0) << bench.out;
}

TEST(GenCheckpoint, ShapesThatCannotWorkAreRefusedWithOneLine) {
  const std::string dir = MakeTempDir("gen") + "/ckpt";
  for (const char* bad : {"--dim 65 --heads 4", "--heads 4 --kv-heads 3", "--dim 64 --heads 4 --kv-heads -2",
                          "--dim 64 --heads 4 --ffn -1", "--dim 64 --heads 4 --vocab 0"}) {
    SCOPED_TRACE(bad);
    ExpectOneLineError(RunCli("gen-checkpoint -o " + dir + " --layers 1 " + std::string(bad)), "gen-checkpoint");
    EXPECT_FALSE(fs::exists(dir + "/config.json"));
  }
}

TEST(GenCheckpoint, WhenTheWeightsCannotBeWrittenNoConfigOrTempFileIsLeft) {
  const std::string dir = MakeTempDir("gen");
  // A directory where model.safetensors should go: the final rename fails.
  fs::create_directory(dir + "/model.safetensors");
  fs::create_directory(dir + "/model.safetensors/occupied");
  WriteFile(dir + "/config.json", "{\"model_type\": \"llama\"}");  // an earlier run's
  ExpectOneLineError(RunCli("gen-checkpoint -o " + dir + " " + kSmallShape), "model.safetensors");
  EXPECT_FALSE(fs::exists(dir + "/config.json"));
  EXPECT_TRUE(TempFilesIn(dir).empty());
}

}  // namespace
}  // namespace slm::testing
