// Sliding-window cache groups: ring caches (cache_len = window) and full-length sliding mode
// (cache_len = max context, the mask enforces the window) must give the logits of the
// one-token path for prefill chunks shorter and longer than the window (a chunk of T rows over a
// ring of W < T slots commits its rows in ascending t after attention, so only the last W
// survive), across ring wrap-arounds, and the same tokens as each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "e2e/artifacts.h"
#include "io/contract_metadata.h"

namespace slm::testing {
namespace {

namespace fs = std::filesystem;

// Mistral's zoo checkpoint with its sliding_window replaced by `window` (weights linked).
std::string MistralWithWindow(int64_t window) {
  static std::map<int64_t, std::string> cache;
  auto it = cache.find(window);
  if (it != cache.end()) return it->second;
  const fs::path src = SharedDir() + "/models/zoo/mistral";
  const fs::path dir = MakeTempDir("mistral-w" + std::to_string(window));
  for (const auto& entry : fs::directory_iterator(src)) {
    fs::create_symlink(entry.path(), dir / entry.path().filename());
  }
  nlohmann::json config = ReadJson((src / "config.json").string());
  config["sliding_window"] = window;
  fs::remove(dir / "config.json");
  std::ofstream(dir / "config.json") << config.dump(2);
  cache[window] = dir.string();
  return dir.string();
}

std::string Compile(const std::string& checkpoint, int64_t step, model::SlidingMode mode) {
  const std::string path = MakeTempDir("sliding") + "/model.slm";
  model::CompileOptions opt;
  opt.prefill_steps = {step};
  opt.sliding_mode = mode;
  opt.max_context_len = 128;
  auto report = model::CompileCheckpoint(checkpoint, path, opt);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  return path;
}

// The golden's longest prompt followed by its continuation: 112 tokens, so a ring of 8..16
// slots wraps many times.
std::vector<int32_t> LongSequence() {
  nlohmann::json golden = ReadJson(SharedDir() + "/golden/zoo/mistral.json");
  const auto& r = golden["results"].back();
  std::vector<int32_t> ids = r["prompt"].get<std::vector<int32_t>>();
  for (int32_t id : r["generated"].get<std::vector<int32_t>>()) ids.push_back(id);
  return ids;
}

struct SlidingCase {
  int64_t window;
  int64_t step;
  model::SlidingMode mode;
};

std::string SlidingCaseName(const ::testing::TestParamInfo<SlidingCase>& info) {
  return "window" + std::to_string(info.param.window) + "_step" + std::to_string(info.param.step) +
         (info.param.mode == model::SlidingMode::kRing ? "_ring" : "_fulllength");
}

class SlidingWindow : public ::testing::TestWithParam<SlidingCase> {};

// Chunks of uneven sizes (shorter than, equal to and longer than the window and the step),
// compared after each chunk with the one-token path of a full-length artifact.
TEST_P(SlidingWindow, ChunkedPrefillMatchesTheOneTokenPathAcrossRingWraps) {
  const SlidingCase& c = GetParam();
  const std::string ckpt = MistralWithWindow(c.window);
  auto ref = LoadRunner(Compile(ckpt, 8, model::SlidingMode::kFullLength));
  auto run = LoadRunner(Compile(ckpt, c.step, c.mode));
  ASSERT_TRUE(ref && run);

  const io::CacheGroup* g = run->session().metadata().FindGroup("sliding");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->window, c.window);
  EXPECT_EQ(g->cache_len, c.mode == model::SlidingMode::kRing ? c.window : 128);

  const std::vector<int32_t> ids = LongSequence();
  const int64_t vocab = ref->session().vocab_size();
  std::vector<float> last(vocab), all;
  ASSERT_TRUE(ref->session().FeedDecodeOnly(ids, last, &all).ok());

  float worst = 0;
  size_t done = 0;
  const size_t chunks[] = {1, 3, 37, 8, 33, 5, 16, 9};  // sums to 112
  for (size_t n : chunks) {
    ASSERT_LE(done + n, ids.size());
    Status st = run->session().Feed(std::span<const int32_t>(ids).subspan(done, n), last);
    ASSERT_TRUE(st.ok()) << st.ToString();
    done += n;
    const float* want = all.data() + (done - 1) * vocab;
    const float d = MaxAbsDiff(last.data(), want, vocab);
    // f32 rounding only: chunks of 32+ rows run the panel GEMM, whose summation order differs
    // from the one-token path's dot products (measured up to ~4e-6 of the largest logit).
    const float scale = std::fabs(*std::max_element(want, want + vocab, [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
    EXPECT_LT(d, 2e-5f * scale) << "after " << done << " tokens";
    EXPECT_EQ(std::max_element(last.begin(), last.end()) - last.begin(),
              std::max_element(want, want + vocab) - want)
        << "after " << done << " tokens";
    worst = std::max(worst, d);
  }
  EXPECT_EQ(done, ids.size());
  std::printf("[ window %lld step %lld %s ] max |Δ| vs one-token path %.3g\n",
              static_cast<long long>(c.window), static_cast<long long>(c.step),
              model::SlidingModeName(c.mode), worst);
}

std::vector<SlidingCase> SlidingCases() {
  std::vector<SlidingCase> cases;
  for (int64_t w : {8, 11, 16}) {
    for (int64_t step : {8, 32}) {
      for (auto mode : {model::SlidingMode::kRing, model::SlidingMode::kFullLength}) {
        cases.push_back({w, step, mode});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Mistral, SlidingWindow, ::testing::ValuesIn(SlidingCases()), SlidingCaseName);

// Greedy generation from the same prompt gives the same tokens in both modes, and the window
// matters (turning it off changes them), so the comparison can fail.
TEST(SlidingModes, RingAndFullLengthGenerateTheSameTokensAndTheWindowMatters) {
  const std::vector<int32_t> ids = LongSequence();
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 40);
  auto generate = [&](const std::string& ckpt, model::SlidingMode mode) {
    auto runner = LoadRunner(Compile(ckpt, 8, mode));
    EXPECT_TRUE(runner);
    llm::GenerateOptions opt;
    opt.max_new_tokens = 48;
    opt.stop_on_eos = false;
    auto r = runner->Generate(prompt, opt);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->generated : std::vector<int32_t>{};
  };
  const std::string ckpt = MistralWithWindow(8);
  const auto ring = generate(ckpt, model::SlidingMode::kRing);
  const auto full = generate(ckpt, model::SlidingMode::kFullLength);
  EXPECT_EQ(ring, full);
  EXPECT_EQ(ring.size(), 48u);
  // A window as long as the context: no sliding layer at all.
  const auto unwindowed = generate(MistralWithWindow(128), model::SlidingMode::kRing);
  EXPECT_NE(ring, unwindowed);
}

}  // namespace
}  // namespace slm::testing
