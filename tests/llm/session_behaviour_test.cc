// Session behaviour: several prefill steps, tail policies (auto included), a capacity check free
// of side effects, reset, the allocator hook, fork, snapshot/restore, prefix reuse and rewind.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>

#include "llm/session_snapshot.h"
#include "llm/session_test_util.h"

namespace slm::testing {
namespace {

using llm::FeedReport;
using llm::Session;
using llm::TailPolicy;

std::unique_ptr<Session> Open(TailPolicy p = TailPolicy::kPad, Allocator* alloc = nullptr,
                              std::map<std::string, double> costs = {}) {
  llm::SessionOptions o;
  o.tail_policy = p;
  o.allocator = alloc;
  o.method_cost_ms = std::move(costs);
  auto s = OpenSession(SmallArtifact(), o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::vector<float> DecodeOnly(std::span<const int32_t> tokens) {
  auto s = Open(TailPolicy::kDecode);
  std::vector<float> last(s->vocab_size());
  EXPECT_TRUE(s->FeedDecodeOnly(tokens, last).ok());
  return last;
}

TEST(SessionPrefill, CoversThePromptWithTheLargestStepsThatFit) {
  auto s = Open(TailPolicy::kDecode);
  ASSERT_TRUE(s);
  std::vector<int32_t> prompt = TestTokens(39, s->vocab_size());  // 16 + 16 + 4 + 3 decode
  std::vector<float> got(s->vocab_size());
  FeedReport r;
  ASSERT_TRUE(s->Feed(prompt, got, &r).ok());
  EXPECT_EQ(r.prefill_calls, 3);
  EXPECT_EQ(r.decode_calls, 3);
  EXPECT_EQ(r.tokens_computed, 39);
  EXPECT_EQ(r.rows_computed, 16 + 16 + 4 + 3);
  EXPECT_LT(MaxAbsDiff(got.data(), DecodeOnly(prompt).data(), got.size()), 1e-4f);
}

TEST(SessionPrefill, PadPolicyPadsTheTailIntoTheSmallestStep) {
  auto s = Open(TailPolicy::kPad);
  std::vector<int32_t> prompt = TestTokens(19, s->vocab_size());  // 16 + 3 padded into 4
  std::vector<float> got(s->vocab_size());
  FeedReport r;
  ASSERT_TRUE(s->Feed(prompt, got, &r).ok());
  EXPECT_EQ(r.prefill_calls, 2);
  EXPECT_EQ(r.decode_calls, 0);
  EXPECT_EQ(r.rows_computed, 20);
  EXPECT_LT(MaxAbsDiff(got.data(), DecodeOnly(prompt).data(), got.size()), 1e-4f);
}

TEST(SessionPrefill, AutoPolicyPicksTheCheaperTailByCost) {
  std::vector<int32_t> prompt;
  std::vector<float> want;
  for (bool decode_cheap : {true, false}) {
    std::map<std::string, double> costs = {{"prefill_4", 1.0}, {"prefill_16", 3.0}, {"decode", decode_cheap ? 0.2 : 0.5}};
    auto s = Open(TailPolicy::kAuto, nullptr, costs);
    ASSERT_TRUE(s);
    if (prompt.empty()) {
      prompt = TestTokens(19, s->vocab_size());  // tail of 3: pad costs 1.0, decode 3 × cost
      want = DecodeOnly(prompt);
    }
    std::vector<float> got(s->vocab_size());
    FeedReport r;
    ASSERT_TRUE(s->Feed(prompt, got, &r).ok());
    EXPECT_EQ(r.decode_calls, decode_cheap ? 3 : 0);
    EXPECT_EQ(r.prefill_calls, decode_cheap ? 1 : 2);
    EXPECT_LT(MaxAbsDiff(got.data(), want.data(), got.size()), 1e-4f);
  }
}

TEST(SessionPrefill, AutoPolicyMeasuresEveryMethodWhenNoCostsAreGiven) {
  auto s = Open(TailPolicy::kAuto);
  ASSERT_TRUE(s);
  for (const char* m : {"prefill_4", "prefill_16", "decode"}) {
    ASSERT_TRUE(s->method_cost_ms().count(m)) << m;
    EXPECT_GE(s->method_cost_ms().at(m), 0.0);
  }
  EXPECT_EQ(s->pos(), 0);  // measuring commits nothing
}

TEST(SessionCapacity, RefusedThenAcceptedEqualsAcceptedOnAFreshSession) {
  std::vector<int32_t> seq;
  std::vector<float> want;
  for (TailPolicy p : {TailPolicy::kPad, TailPolicy::kDecode, TailPolicy::kAuto}) {
    for (int64_t tail : {1, 3, 5, 17}) {
      auto a = Open(p, nullptr, {{"prefill_4", 1.0}, {"prefill_16", 3.0}, {"decode", 0.4}});
      auto b = Open(p, nullptr, {{"prefill_4", 1.0}, {"prefill_16", 3.0}, {"decode", 0.4}});
      const int64_t M = a->max_context_len();
      if (seq.empty()) {
        seq = TestTokens(M, a->vocab_size());
        want = DecodeOnly(seq);
      }
      std::vector<float> la(a->vocab_size()), lb(a->vocab_size());
      std::span<const int32_t> all(seq);
      ASSERT_TRUE(a->Feed(all.first(M - tail), la).ok());
      ASSERT_TRUE(b->Feed(all.first(M - tail), lb).ok());
      Status refused = a->Feed(all.subspan(M - tail - 1), la);  // tail + 1 tokens: one too many
      EXPECT_EQ(refused.code(), ErrorCode::kOutOfRange) << refused.ToString();
      EXPECT_EQ(a->pos(), M - tail);
      EXPECT_FALSE(a->poisoned());
      ASSERT_TRUE(a->Feed(all.subspan(M - tail), la).ok());
      ASSERT_TRUE(b->Feed(all.subspan(M - tail), lb).ok());
      EXPECT_TRUE(BitEqual(la, lb)) << llm::TailPolicyName(p) << " tail " << tail;
      EXPECT_LT(MaxAbsDiff(la.data(), want.data(), la.size()), 1e-4f) << llm::TailPolicyName(p) << " tail " << tail;
      EXPECT_EQ(a->CheckCapacity(1).code(), ErrorCode::kOutOfRange);
    }
  }
}

TEST(SessionCapacity, RefusedBadTokenChangesNothing) {
  auto s = Open();
  std::vector<int32_t> bad = {1, 5, 100000};
  std::vector<float> l(s->vocab_size());
  EXPECT_EQ(s->Feed(bad, l).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s->pos(), 0);
  EXPECT_FALSE(s->poisoned());
}

TEST(SessionReset, WithAndWithoutClearingEqualsAFreshSession) {
  std::vector<int32_t> junk = TestTokens(40, 512, 99), prompt = TestTokens(23, 512);
  auto fresh = Open();
  std::vector<float> want(fresh->vocab_size()), got(fresh->vocab_size());
  ASSERT_TRUE(fresh->Feed(prompt, want).ok());
  for (bool clear : {false, true}) {
    auto s = Open();
    ASSERT_TRUE(s->Feed(junk, got).ok());
    s->Reset(clear);
    EXPECT_EQ(s->pos(), 0);
    EXPECT_TRUE(s->history().empty());
    ASSERT_TRUE(s->Feed(prompt, got).ok());
    EXPECT_TRUE(BitEqual(got, want)) << "clear=" << clear;
  }
}

// Counts every allocation; checks alignment and that frees match allocations.
class CountingAllocator final : public Allocator {
 public:
  void* Allocate(size_t bytes, size_t alignment) override {
    void* p = inner_.Allocate(bytes, alignment);
    std::lock_guard<std::mutex> l(mu_);
    ++allocations;
    live_bytes += bytes;
    total_bytes += bytes;
    if (reinterpret_cast<uintptr_t>(p) % kBufferAlignment != 0 || alignment < kBufferAlignment) ++misaligned;
    sizes[p] = bytes;
    return p;
  }
  void Free(void* p, size_t bytes) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = sizes.find(p);
    if (it == sizes.end() || it->second != bytes) ++bad_frees;
    else sizes.erase(it);
    live_bytes -= bytes;
    inner_.Free(p, bytes);
  }
  int64_t allocations = 0, live_bytes = 0, total_bytes = 0, misaligned = 0, bad_frees = 0;
  std::map<void*, size_t> sizes;

 private:
  std::mutex mu_;
  AlignedHeapAllocator inner_;
};

TEST(SessionAllocator, EveryStateAndIoBufferComesFromTheCallersAllocator) {
  auto program = runtime::Program::Load(SmallArtifact());
  ASSERT_TRUE(program.ok());
  // What each loaded method allocates for itself (arena, scratch), measured the same way.
  int64_t method_bytes = 0;
  for (const std::string& name : (*program)->method_names()) {
    CountingAllocator m;
    auto method = (*program)->LoadMethod(name, m);
    ASSERT_TRUE(method.ok());
    method_bytes += m.live_bytes;
  }
  CountingAllocator alloc;
  {
    llm::SessionOptions o;
    o.allocator = &alloc;
    auto s = Session::Create(*program, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const io::ContractMetadata& m = (*s)->metadata();
    int64_t expected = method_bytes;
    for (const io::CacheLayer& l : m.layers) expected += 2 * 4 * l.n_kv_heads * m.FindGroup(l.group)->cache_len * l.head_dim;
    for (const io::MethodInfo& mi : m.methods) {
      const int64_t T = mi.step, rows = mi.logits_mode == "selected" ? 1 : T;
      expected += 4 * T * 2 + 4 * rows * m.vocab_size + (mi.logits_mode == "selected" ? 4 : 0);
      for (const io::CacheGroup& g : m.groups) expected += 4 * T * (g.cache_len + T);
    }
    EXPECT_EQ(alloc.live_bytes, expected) << "a buffer bypassed the allocator, or an unexpected one was made";
    EXPECT_EQ(alloc.misaligned, 0);
    // Buffers outlive the calls that use them (run under ASan in the sanitizer build).
    std::vector<int32_t> prompt = TestTokens(21, m.vocab_size);
    std::vector<float> logits(m.vocab_size);
    ASSERT_TRUE((*s)->Feed(prompt, logits).ok());
    EXPECT_EQ(alloc.live_bytes, expected) << "Feed allocated state";
    // A fork takes its buffers from the same allocator.
    auto f = (*s)->Fork();
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(alloc.live_bytes, 2 * expected);
  }
  EXPECT_EQ(alloc.live_bytes, 0);
  EXPECT_EQ(alloc.bad_frees, 0);
  EXPECT_GT(alloc.allocations, 0);
}

TEST(SessionFork, CopyAndOriginalContinueIndependently) {
  auto s = Open();
  std::vector<int32_t> seq = TestTokens(40, s->vocab_size());
  std::span<const int32_t> all(seq);
  std::vector<float> a(s->vocab_size()), b(s->vocab_size());
  ASSERT_TRUE(s->Feed(all.first(10), a).ok());
  auto f = s->Fork();
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->pos(), 10);
  ASSERT_TRUE((*f)->Feed(all.subspan(10, 30), b).ok());
  // The original is untouched by the fork's progress.
  EXPECT_EQ(s->pos(), 10);
  ASSERT_TRUE(s->Feed(all.subspan(10, 30), a).ok());
  EXPECT_TRUE(BitEqual(a, b));
  EXPECT_LT(MaxAbsDiff(a.data(), DecodeOnly(seq).data(), a.size()), 1e-4f);
}

TEST(SessionSnapshot, RestoreInAFreshSessionContinuesIdentically) {
  auto s = Open();
  std::vector<int32_t> seq = TestTokens(45, s->vocab_size());
  std::span<const int32_t> all(seq);
  std::vector<float> a(s->vocab_size()), b(s->vocab_size());
  ASSERT_TRUE(s->Feed(all.first(21), a).ok());
  const std::string path = MakeTempDir("snap") + "/s.snap";
  ASSERT_TRUE(s->SaveSnapshot(path).ok());
  auto t = Open();
  ASSERT_TRUE(t->Feed(all.last(7), b).ok());  // junk state, replaced by the restore
  ASSERT_TRUE(t->LoadSnapshot(path).ok());
  EXPECT_EQ(t->pos(), 21);
  EXPECT_TRUE(std::equal(t->history().begin(), t->history().end(), seq.begin()));
  ASSERT_TRUE(s->Feed(all.subspan(21), a).ok());
  ASSERT_TRUE(t->Feed(all.subspan(21), b).ok());
  EXPECT_TRUE(BitEqual(a, b));
}

TEST(SessionSnapshot, CorruptFileIsRefusedAndChangesNothing) {
  auto s = Open();
  std::vector<int32_t> seq = TestTokens(12, s->vocab_size());
  std::vector<float> l(s->vocab_size());
  ASSERT_TRUE(s->Feed(seq, l).ok());
  const std::string path = MakeTempDir("snap") + "/s.snap";
  ASSERT_TRUE(s->SaveSnapshot(path).ok());
  std::string bytes = ReadFile(path);
  bytes[bytes.size() - 3] ^= 0x40;
  WriteFile(path, bytes);
  auto t = Open();
  Status st = t->LoadSnapshot(path);
  EXPECT_EQ(st.code(), ErrorCode::kParseError) << st.ToString();
  EXPECT_NE(st.message().find("checksum"), std::string::npos);
  EXPECT_EQ(t->pos(), 0);
  WriteFile(path, bytes.substr(0, 20));
  EXPECT_FALSE(t->LoadSnapshot(path).ok());
}

TEST(SessionSnapshot, GeometryOfAnotherArtifactIsRefusedNamingTheField) {
  auto other = OpenSession(CompiledArtifact(SharedDir() + "/models/stories260K", {4, 16}, 48));
  ASSERT_TRUE(other.ok());
  std::vector<int32_t> seq = TestTokens(5, 512);
  std::vector<float> l(512);
  ASSERT_TRUE((*other)->Feed(seq, l).ok());
  const std::string path = MakeTempDir("snap") + "/s.snap";
  ASSERT_TRUE((*other)->SaveSnapshot(path).ok());
  auto s = Open();
  Status st = s->LoadSnapshot(path);
  EXPECT_EQ(st.code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("max_context_len"), std::string::npos) << st.message();
}

TEST(SessionPrefixReuse, ComputesOnlyTheTokensAfterTheSharedPrefix) {
  auto s = Open();
  std::vector<int32_t> seq = TestTokens(50, s->vocab_size());
  std::span<const int32_t> all(seq);
  std::vector<float> got(s->vocab_size());
  ASSERT_TRUE(s->Feed(all.first(30), got).ok());
  FeedReport r;
  ASSERT_TRUE(s->FeedWithPrefixReuse(all.first(37), got, &r).ok());
  EXPECT_EQ(r.tokens_reused, 30);
  EXPECT_EQ(r.tokens_computed, 7);
  EXPECT_LT(MaxAbsDiff(got.data(), DecodeOnly(all.first(37)).data(), got.size()), 1e-4f);
  // A diverging request rewinds to the shared prefix.
  std::vector<int32_t> other(seq.begin(), seq.begin() + 25);
  other.push_back(7);
  other.push_back(8);
  FeedReport r2;
  ASSERT_TRUE(s->FeedWithPrefixReuse(other, got, &r2).ok());
  EXPECT_EQ(r2.tokens_reused, 25);
  EXPECT_EQ(r2.tokens_computed, 2);
  EXPECT_EQ(s->pos(), 27);
  EXPECT_LT(MaxAbsDiff(got.data(), DecodeOnly(other).data(), got.size()), 1e-4f);
  // The same sequence again: only its last token is recomputed (its logits are returned).
  FeedReport r3;
  ASSERT_TRUE(s->FeedWithPrefixReuse(other, got, &r3).ok());
  EXPECT_EQ(r3.tokens_computed, 1);
}

TEST(SessionRewind, FullCachesRewindAndContinueLikeAFreshRun) {
  auto s = Open();
  std::vector<int32_t> seq = TestTokens(40, s->vocab_size());
  std::span<const int32_t> all(seq);
  std::vector<float> got(s->vocab_size());
  ASSERT_TRUE(s->Feed(all, got).ok());
  ASSERT_TRUE(s->Rewind(15).ok());
  EXPECT_EQ(s->pos(), 25);
  ASSERT_TRUE(s->Feed(all.subspan(25, 10), got).ok());
  EXPECT_LT(MaxAbsDiff(got.data(), DecodeOnly(all.first(35)).data(), got.size()), 1e-4f);
  EXPECT_EQ(s->Rewind(36).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(s->pos(), 35);
}

TEST(SessionRewind, WrappedRingIsRefusedWithAClearError) {
  model::CompileOptions opt;
  opt.prefill_steps = {4};
  opt.max_context_len = 64;
  const std::string path = MakeTempDir("ring") + "/mistral.slm";
  auto report = model::CompileCheckpoint(SharedDir() + "/models/zoo/mistral", path, opt);
  if (!report.ok()) GTEST_SKIP() << "mistral does not compile yet: " << report.status().ToString();
  auto s = OpenSession(path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const io::CacheGroup* ring = nullptr;
  for (const auto& g : (*s)->metadata().groups) if (g.cache_len < (*s)->max_context_len()) ring = &g;
  if (!ring) GTEST_SKIP() << "mistral compiled without a ring group (window >= context)";
  std::vector<int32_t> seq = TestTokens(ring->cache_len + 3, (*s)->vocab_size());
  std::vector<float> l((*s)->vocab_size());
  ASSERT_TRUE((*s)->Feed(seq, l).ok());
  Status st = (*s)->Rewind(2);
  EXPECT_EQ(st.code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("'" + ring->name + "'"), std::string::npos) << st.message();
  EXPECT_EQ((*s)->pos(), ring->cache_len + 3);
}

}  // namespace
}  // namespace slm::testing
