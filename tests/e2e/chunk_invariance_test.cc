// Chunked prefill (with a padded tail) gives the same logits and tokens as feeding the prompt
// one token at a time through decode.
#include <gtest/gtest.h>

#include <random>

#include "e2e/artifacts.h"

namespace slm::testing {
namespace {

struct ChunkCase {
  int64_t step;
  int64_t prompt_len;
  llm::TailPolicy tail;
};

void PrintTo(const ChunkCase& c, std::ostream* os) {
  *os << "step " << c.step << " prompt " << c.prompt_len << (c.tail == llm::TailPolicy::kPad ? " pad" : " decode");
}

class ChunkInvariance : public ::testing::TestWithParam<ChunkCase> {};

std::vector<int32_t> RandomPrompt(int64_t n, int64_t vocab) {
  std::mt19937 rng(static_cast<uint32_t>(n) * 7919u);
  std::vector<int32_t> ids = {1};
  while (static_cast<int64_t>(ids.size()) < n) ids.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
  return ids;
}

TEST_P(ChunkInvariance, PrefillMatchesTheOneTokenPath) {
  const ChunkCase& c = GetParam();
  auto runner = LoadRunner(CompiledArtifact(SharedDir() + "/models/stories260K", {c.step}), c.tail);
  ASSERT_TRUE(runner);
  llm::Session& s = runner->session();
  const int64_t vocab = s.vocab_size();
  std::vector<int32_t> prompt = RandomPrompt(c.prompt_len, vocab);

  std::vector<float> ref(vocab), got(vocab);
  llm::GenerateOptions opt;
  opt.max_new_tokens = 16;
  opt.stop_on_eos = false;

  // Reference: the prompt one token at a time through decode, then greedy decoding.
  ASSERT_TRUE(s.FeedDecodeOnly(std::span<const int32_t>(prompt).first(prompt.size() - 1), ref).ok());
  auto want = runner->Generate(std::span<const int32_t>(prompt).last(1), opt);
  ASSERT_TRUE(want.ok()) << want.status().ToString();

  // Under test: chunked prefill (caches cleared first so stale rows cannot hide a mask bug).
  s.Reset(/*clear=*/true);
  auto have = runner->Generate(prompt, opt);
  ASSERT_TRUE(have.ok()) << have.status().ToString();
  EXPECT_EQ(have->generated, want->generated);

  // Logits of the prompt's last token: chunked vs one-token path, and the position reached.
  s.Reset();
  ASSERT_TRUE(s.FeedDecodeOnly(prompt, ref).ok());
  s.Reset();
  llm::FeedReport report;
  ASSERT_TRUE(s.Feed(prompt, got, &report).ok());
  EXPECT_LT(MaxAbsDiff(ref.data(), got.data(), vocab), 1e-4f);
  EXPECT_EQ(s.pos(), c.prompt_len);
  const int64_t full_chunks = c.prompt_len / c.step, tail = c.prompt_len % c.step;
  const bool tail_prefilled = c.tail == llm::TailPolicy::kPad && tail > 1;
  EXPECT_EQ(report.prefill_calls, full_chunks + (tail_prefilled ? 1 : 0));
  EXPECT_EQ(report.decode_calls, tail_prefilled ? 0 : tail);
}

std::vector<ChunkCase> ChunkCases() {
  std::vector<ChunkCase> cases;
  for (int64_t step : {8, 32}) {
    for (int64_t len : {1, 7, 31, 32, 33, 100}) {
      cases.push_back({step, len, llm::TailPolicy::kPad});
      cases.push_back({step, len, llm::TailPolicy::kDecode});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Stories260K, ChunkInvariance, ::testing::ValuesIn(ChunkCases()),
                         [](const auto& info) {
                           return "step" + std::to_string(info.param.step) + "_len" + std::to_string(info.param.prompt_len) +
                                  (info.param.tail == llm::TailPolicy::kPad ? "_pad" : "_decode");
                         });

}  // namespace
}  // namespace slm::testing
