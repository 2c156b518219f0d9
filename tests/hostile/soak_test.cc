// Long run: many generations through one session, with resets, forks and snapshot restores in
// between, each compared token for token with a fresh session's output for the same prompt;
// and the process's resident memory must not grow once the first round has run.
//
// Models: stories260K (full caches, context filled to its end every generation) and the zoo's
// Mistral (sliding window 12 compiled as rings of 12 slots, so every generation wraps them).
// Length: SLM_SOAK_TOKENS tokens per model (default 3000, the CI version); scripts/soak.sh runs
// the nightly version with 100000 or more.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "core/thread_pool.h"
#include "e2e/artifacts.h"
#include "llm/runner.h"
#include "llm/session.h"

namespace slm::testing {
namespace {

int64_t SoakTokens() {
  const char* env = std::getenv("SLM_SOAK_TOKENS");
  return env ? std::max<int64_t>(1, std::atoll(env)) : 3000;
}

// Resident set size of this process in bytes (/proc/self/statm).
int64_t ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;  // ASan's quarantine holds freed memory: RSS is not comparable
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

int32_t Argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Greedy continuation on `s` (whose last logits are `logits`) until the context is full.
std::vector<int32_t> ContinueGreedy(llm::Session& s, std::vector<float>& logits) {
  std::vector<int32_t> out;
  while (s.CheckCapacity(1).ok()) {
    const int32_t next[1] = {Argmax(logits)};
    EXPECT_TRUE(s.Feed(next, logits).ok());
    out.push_back(next[0]);
  }
  return out;
}

// Prompt, then greedy to the end of the context.
std::vector<int32_t> GenerateToEnd(llm::Session& s, const std::vector<int32_t>& prompt) {
  std::vector<float> logits(s.vocab_size());
  EXPECT_TRUE(s.Feed(prompt, logits).ok());
  return ContinueGreedy(s, logits);
}

void Soak(const std::string& checkpoint, int64_t max_context) {
  // One thread: these models are tiny and mostly decode one token per call, where a pool only
  // adds hand-offs (slow on a busy CI machine); restored to the machine's count at the end.
  ThreadPool::SetDefaultThreadCount(1);
  struct RestoreThreads {
    ~RestoreThreads() { ThreadPool::SetDefaultThreadCount(0); }
  } restore_threads;
  const std::string artifact = CompiledArtifact(checkpoint, {8}, max_context);
  const std::vector<std::vector<int32_t>> prompts = {{1}, {1, 403, 407, 261}, {1, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39}};

  // References: a fresh runner per prompt.
  std::vector<std::vector<int32_t>> reference;
  for (const auto& p : prompts) {
    auto fresh = llm::Runner::Load(artifact);
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    reference.push_back(GenerateToEnd((*fresh)->session(), p));
  }

  auto runner = llm::Runner::Load(artifact);
  ASSERT_TRUE(runner.ok());
  llm::Session& s = (*runner)->session();
  const std::string snap = MakeTempDir("soak") + "/s.snap";
  const int64_t target = SoakTokens();
  int64_t tokens = 0, rss_after_first_round = 0;
  for (int64_t round = 0; tokens < target; ++round) {
    const size_t k = static_cast<size_t>(round) % prompts.size();
    const auto& prompt = prompts[k];
    s.Reset(/*clear=*/round % 5 == 4);
    std::vector<int32_t> got;
    switch (round % 3) {
      case 0:  // plain: reset and generate
        got = GenerateToEnd(s, prompt);
        break;
      case 1: {  // fork right after the prompt; the fork generates
        std::vector<float> logits(s.vocab_size());
        ASSERT_TRUE(s.Feed(prompt, logits).ok());
        auto fork = s.Fork();
        ASSERT_TRUE(fork.ok()) << fork.status().ToString();
        got = ContinueGreedy(**fork, logits);
        break;
      }
      case 2: {  // snapshot halfway, finish, restore, finish again: both must match
        std::vector<float> logits(s.vocab_size());
        ASSERT_TRUE(s.Feed(prompt, logits).ok());
        const size_t half = std::max<size_t>(1, reference[k].size() / 2);
        int32_t pending = 0;  // the token fed right after the snapshot
        for (size_t i = 0; i < half; ++i) {
          const int32_t next[1] = {Argmax(logits)};
          if (i + 1 == half) {
            ASSERT_TRUE(s.SaveSnapshot(snap).ok());
            pending = next[0];
          }
          ASSERT_TRUE(s.Feed(next, logits).ok());
          got.push_back(next[0]);
        }
        std::vector<int32_t> first = got;
        for (int32_t t : ContinueGreedy(s, logits)) first.push_back(t);
        ASSERT_EQ(first, reference[k]) << "round " << round << " before restore";
        // A snapshot holds the state, not the last logits: feed the token that followed it.
        ASSERT_TRUE(s.LoadSnapshot(snap).ok());
        const int32_t again[1] = {pending};
        ASSERT_TRUE(s.Feed(again, logits).ok());
        for (int32_t t : ContinueGreedy(s, logits)) got.push_back(t);
        break;
      }
    }
    ASSERT_EQ(got, reference[k]) << "round " << round << " (prompt " << k << ") differs from a fresh session";
    tokens += static_cast<int64_t>(prompt.size() + got.size());
    if (round == 2) rss_after_first_round = ResidentBytes();  // every kind of round ran once
  }
  if (!kAsan && rss_after_first_round > 0) {
    const int64_t growth = ResidentBytes() - rss_after_first_round;
    EXPECT_LT(growth, 4 << 20) << "resident memory grew by " << growth << " bytes over " << tokens << " tokens";
  }
  std::printf("soak: %s: %lld tokens, resident %lld KiB after the first rounds, %lld KiB at the end\n", checkpoint.c_str(),
              static_cast<long long>(tokens), static_cast<long long>(rss_after_first_round >> 10),
              static_cast<long long>(ResidentBytes() >> 10));
}

TEST(Soak, FullCacheGenerationsMatchAFreshSessionAndMemoryStaysFlat) {
  Soak(SharedDir() + "/models/stories260K", 64);
}

TEST(Soak, SlidingWindowRingGenerationsMatchAFreshSessionAndMemoryStaysFlat) {
  Soak(SharedDir() + "/models/zoo/mistral", 48);
}

}  // namespace
}  // namespace slm::testing
