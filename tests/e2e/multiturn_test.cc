// Multi-turn chat through prefix reuse, and session snapshots that continue in a new process.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "e2e/artifacts.h"

namespace slm::testing {
namespace {

std::vector<int32_t> Tokens(int64_t n, uint32_t seed) {
  std::vector<int32_t> ids;
  uint32_t x = seed;
  while (static_cast<int64_t>(ids.size()) < n) {
    x = x * 1664525u + 1013904223u;
    ids.push_back(3 + static_cast<int32_t>((x >> 8) % 500u));
  }
  return ids;
}

std::string Csv(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

llm::GenerateOptions Greedy(int64_t n, bool reuse) {
  llm::GenerateOptions o;
  o.max_new_tokens = n;
  o.stop_on_eos = false;
  o.reuse_prefix = reuse;
  return o;
}

TEST(MultiTurn, SecondTurnPrefillsOnlyItsNewTokensAndEqualsAFromScratchRun) {
  const std::string path = CompiledArtifact(SharedDir() + "/models/stories260K", {4, 16}, 128);
  for (llm::TailPolicy policy : {llm::TailPolicy::kPad, llm::TailPolicy::kDecode, llm::TailPolicy::kAuto}) {
    auto chat = LoadRunner(path, policy);
    ASSERT_TRUE(chat);
    std::vector<int32_t> convo = {1};
    std::vector<int32_t> user1 = Tokens(21, 5);
    convo.insert(convo.end(), user1.begin(), user1.end());
    auto t1 = chat->Generate(convo, Greedy(10, true));
    ASSERT_TRUE(t1.ok()) << t1.status().ToString();
    EXPECT_EQ(t1->stats.prefill_tokens_computed, static_cast<int64_t>(convo.size()));
    convo.insert(convo.end(), t1->generated.begin(), t1->generated.end());
    std::vector<int32_t> user2 = Tokens(13, 9);
    convo.insert(convo.end(), user2.begin(), user2.end());

    auto t2 = chat->Generate(convo, Greedy(10, true));
    ASSERT_TRUE(t2.ok()) << t2.status().ToString();
    // New tokens: the last reply token (sampled, never fed) and the user's second message.
    EXPECT_EQ(t2->stats.prefill_tokens_computed, static_cast<int64_t>(user2.size()) + 1) << llm::TailPolicyName(policy);
    EXPECT_EQ(t2->stats.prompt_tokens, static_cast<int64_t>(convo.size()));

    auto scratch = LoadRunner(path, policy);
    auto want = scratch->Generate(convo, Greedy(10, false));
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(t2->generated, want->generated) << llm::TailPolicyName(policy);
    EXPECT_EQ(want->stats.prefill_tokens_computed, static_cast<int64_t>(convo.size()));
  }
}

TEST(MultiTurn, EditingAnEarlierTurnRewindsToTheSharedPrefix) {
  const std::string path = CompiledArtifact(SharedDir() + "/models/stories260K", {4, 16}, 128);
  auto chat = LoadRunner(path);
  std::vector<int32_t> convo = Tokens(30, 3);
  convo[0] = 1;
  ASSERT_TRUE(chat->Generate(convo, Greedy(5, true)).ok());
  std::vector<int32_t> edited(convo.begin(), convo.begin() + 20);
  std::vector<int32_t> tail = Tokens(6, 77);
  edited.insert(edited.end(), tail.begin(), tail.end());
  auto again = chat->Generate(edited, Greedy(8, true));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->stats.prefill_tokens_computed, 6);
  auto want = LoadRunner(path)->Generate(edited, Greedy(8, false));
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(again->generated, want->generated);
}

std::vector<int32_t> GeneratedIds(const CommandResult& r) {
  nlohmann::json j = nlohmann::json::parse(r.out);
  return j["generated_ids"].get<std::vector<int32_t>>();
}

TEST(SessionSnapshotCli, RestoreInANewProcessContinuesLikeTheOriginalProcess) {
  const std::string path = CompiledArtifact(SharedDir() + "/models/stories260K", {4, 16}, 128);
  std::vector<int32_t> p1 = Tokens(19, 11), p2 = Tokens(7, 12);
  p1[0] = 1;
  // In one process: generate, then continue with a second prompt.
  auto runner = LoadRunner(path);
  auto first = runner->Generate(p1, Greedy(9, false));
  ASSERT_TRUE(first.ok());
  auto second = runner->Generate(p2, Greedy(9, false));
  ASSERT_TRUE(second.ok());
  // Across processes: generate and save; restore in a new process and continue.
  const std::string snap = MakeTempDir("snap-cli") + "/session.snap";
  CommandResult a = RunCli("run " + path + " --prompt-ids " + Csv(p1) + " -n 9 --ignore-eos --json --save-session " + snap);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(GeneratedIds(a), first->generated);
  CommandResult b = RunCli("run " + path + " --prompt-ids " + Csv(p2) + " -n 9 --ignore-eos --json --load-session " + snap);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(GeneratedIds(b), second->generated);
}

TEST(SessionSnapshotCli, SnapshotOfAnotherArtifactIsAOneLineError) {
  const std::string small = CompiledArtifact(SharedDir() + "/models/stories260K", {4, 16}, 128);
  const std::string other = CompiledArtifact(SharedDir() + "/models/stories260K", {4, 16}, 64);
  const std::string snap = MakeTempDir("snap-cli") + "/session.snap";
  ASSERT_EQ(RunCli("run " + other + " --prompt-ids 1,5,9 -n 2 --json --save-session " + snap).exit_code, 0);
  CommandResult r = RunCli("run " + small + " --prompt-ids 1,5 -n 2 --json --load-session " + snap);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("max_context_len"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace slm::testing
