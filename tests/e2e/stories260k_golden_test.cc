// stories260K against llama2.c's and transformers' reference outputs.
#include <gtest/gtest.h>

#include <cmath>

#include "e2e/artifacts.h"

namespace slm::testing {
namespace {

std::string Golden() { return SharedDir() + "/golden/stories260K"; }

std::vector<int32_t> ReadIds(const std::string& path) {
  std::vector<int32_t> ids;
  std::stringstream ss(ReadFile(path));
  int32_t id;
  while (ss >> id) ids.push_back(id);
  return ids;
}

TEST(Stories260K, GreedyFromBosReproducesTheGolden256Tokens) {
  std::vector<int32_t> expected = ReadIds(Golden() + "/greedy_t0_bos_256tok.ids.txt");
  ASSERT_EQ(expected.size(), 257u);  // BOS + 256
  auto runner = LoadRunner(CompiledArtifact(Stories()));
  ASSERT_TRUE(runner);
  llm::GenerateOptions opt;
  opt.max_new_tokens = 256;
  opt.stop_on_eos = false;
  auto res = runner->Generate(std::vector<int32_t>{1}, opt);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  std::vector<int32_t> want(expected.begin() + 1, expected.end());
  EXPECT_EQ(res->generated, want);
}

TEST(Stories260K, GreedyTextMatchesTheGoldenText) {
  auto runner = LoadRunner(CompiledArtifact(Stories()));
  ASSERT_TRUE(runner);
  llm::GenerateOptions opt;
  opt.max_new_tokens = 256;
  opt.stop_on_eos = false;
  std::string streamed;
  opt.on_text = [&](std::string_view s) { streamed += s; };
  auto res = runner->Generate(std::vector<int32_t>{1}, opt);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(streamed, res->text);
  std::string golden = ReadFile(Golden() + "/greedy_t0_bos_256tok.txt");
  while (!golden.empty() && (golden.back() == '\n')) golden.pop_back();
  EXPECT_EQ(res->text, golden);
}

TEST(Stories260K, TeacherForcedLogitsWithin1e4OfReference) {
  nlohmann::json meta = ReadJson(Golden() + "/reference_logits_16x512.json");
  std::vector<int32_t> ids = meta["input_ids"].get<std::vector<int32_t>>();
  std::string raw = ReadFile(Golden() + "/reference_logits_16x512.f32");
  ASSERT_EQ(raw.size(), 16u * 512u * 4u);
  const float* ref = reinterpret_cast<const float*>(raw.data());
  auto runner = LoadRunner(CompiledArtifact(Stories()));
  ASSERT_TRUE(runner);
  std::vector<float> last(512), all;
  ASSERT_TRUE(runner->session().FeedDecodeOnly(ids, last, &all).ok());
  ASSERT_EQ(all.size(), 16u * 512u);
  EXPECT_LT(MaxAbsDiff(all.data(), ref, all.size()), 1e-4f);

  // The chunked prefill path gives the same last row.
  runner->session().Reset();
  std::vector<float> prefill_last(512);
  ASSERT_TRUE(runner->session().Feed(ids, prefill_last).ok());
  EXPECT_LT(MaxAbsDiff(prefill_last.data(), ref + 15 * 512, 512), 1e-4f);
}

TEST(Stories260K, StepLogitsWithin1e4OfTransformers) {
  nlohmann::json g = ReadJson(Golden() + "/hf_golden_bos_256.json");
  const auto& r = g["results"][0];
  auto runner = LoadRunner(CompiledArtifact(Stories()));
  ASSERT_TRUE(runner);
  llm::GenerateOptions opt;
  opt.max_new_tokens = 256;
  opt.stop_on_eos = false;
  opt.keep_logits = true;
  auto res = runner->Generate(r["prompt"].get<std::vector<int32_t>>(), opt);
  ASSERT_TRUE(res.ok());
  float worst = 0;
  for (size_t k = 0; k < r["step_top"].size(); ++k) {
    const auto& top = r["step_top"][k];
    for (size_t j = 0; j < top["ids"].size(); ++j) {
      worst = std::max(worst, std::abs(res->logits[k][top["ids"][j].get<int>()] - top["values"][j].get<float>()));
    }
  }
  EXPECT_LT(worst, 1e-4f);
  EXPECT_EQ(res->generated, r["generated"].get<std::vector<int32_t>>());
}

}  // namespace
}  // namespace slm::testing
