// Zoo checkpoints against transformers' outputs (golden/zoo/<family>.json): every prompt's
// last logits and greedy continuation, for the decode-only path and prefill steps 8 and 32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "e2e/artifacts.h"

namespace slm::testing {
namespace {

struct ZooCase {
  std::string family;
  int64_t step;  // 1 = one token at a time through decode
};

void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.family << " step " << c.step; }

std::string CaseName(const ::testing::TestParamInfo<ZooCase>& info) {
  return info.param.family + "_step" + std::to_string(info.param.step);
}

class ZooGolden : public ::testing::TestWithParam<ZooCase> {};

// Tolerance from golden/README.md for an fp32 engine.
constexpr float kLogitTolerance = 1e-3f;

int32_t Argmax(const float* x, int64_t n) { return static_cast<int32_t>(std::max_element(x, x + n) - x); }

TEST_P(ZooGolden, LogitsAndGreedyTokensMatchTransformers) {
  const ZooCase& c = GetParam();
  nlohmann::json golden = ReadJson(SharedDir() + "/golden/zoo/" + c.family + ".json");
  const int64_t vocab = golden["vocab_size"].get<int64_t>();
  std::string artifact = CompiledArtifact(SharedDir() + "/models/zoo/" + c.family, {c.step == 1 ? 8 : c.step});
  auto runner = LoadRunner(artifact);
  ASSERT_TRUE(runner);
  llm::Session& s = runner->session();
  float worst_last = 0, worst_step = 0;
  for (const auto& r : golden["results"]) {
    std::vector<int32_t> prompt = r["prompt"].get<std::vector<int32_t>>();
    std::vector<float> last(vocab);

    // Every prompt position's argmax, from the one-token path.
    s.Reset();
    std::vector<float> all;
    ASSERT_TRUE(s.FeedDecodeOnly(prompt, last, &all).ok());
    std::vector<int32_t> argmax;
    for (size_t j = 0; j < prompt.size(); ++j) argmax.push_back(Argmax(all.data() + j * vocab, vocab));
    EXPECT_EQ(argmax, r["prompt_argmax"].get<std::vector<int32_t>>()) << "prompt of " << prompt.size();

    // The prompt's last logits and the greedy continuation through the path under test.
    s.Reset();
    llm::GenerateOptions opt;
    opt.max_new_tokens = golden["new_tokens"].get<int64_t>();
    opt.stop_on_eos = false;
    opt.keep_logits = true;
    llm::GenerateResult res;
    if (c.step == 1) {
      // Decode-only: feed the prompt one token at a time, then generate from there.
      ASSERT_TRUE(s.FeedDecodeOnly(std::span<const int32_t>(prompt).first(prompt.size() - 1), last).ok());
      auto g = runner->Generate(std::span<const int32_t>(prompt).last(1), opt);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      res = std::move(g).value();
    } else {
      auto g = runner->Generate(prompt, opt);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      res = std::move(g).value();
    }
    std::vector<float> want_last = r["last_logits"].get<std::vector<float>>();
    worst_last = std::max(worst_last, MaxAbsDiff(res.logits[0].data(), want_last.data(), vocab));
    EXPECT_EQ(res.generated, r["generated"].get<std::vector<int32_t>>()) << "prompt of " << prompt.size();
    for (size_t k = 0; k < r["step_top"].size() && k < res.logits.size(); ++k) {
      const auto& top = r["step_top"][k];
      for (size_t j = 0; j < top["ids"].size(); ++j) {
        worst_step = std::max(worst_step, std::abs(res.logits[k][top["ids"][j].get<int>()] - top["values"][j].get<float>()));
      }
    }
  }
  EXPECT_LT(worst_last, kLogitTolerance);
  EXPECT_LT(worst_step, kLogitTolerance);
  std::printf("[ %s step %lld ] max |Δ| last_logits %.3g, step_top %.3g\n", c.family.c_str(),
              static_cast<long long>(c.step), worst_last, worst_step);
}

INSTANTIATE_TEST_SUITE_P(Llama, ZooGolden,
                         ::testing::Values(ZooCase{"llama", 1}, ZooCase{"llama", 8}, ZooCase{"llama", 32},
                                           ZooCase{"llama2", 1}, ZooCase{"llama2", 8}, ZooCase{"llama2", 32}),
                         CaseName);

}  // namespace
}  // namespace slm::testing
