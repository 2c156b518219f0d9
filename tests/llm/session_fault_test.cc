// Failures in the middle of a request, and buffer lifetimes (issue 3: "errors mid-request poison
// the session until reset"; "buffers outlive the calls that use them").
//
// A method failure is injected through runtime::OpObserver::AfterOp after some of the method's
// ops (its cache writes included) ran, so the caches really hold rows of a request that never
// completed. The session must then refuse every call with a clear error until Reset() (or a
// successful LoadSnapshot), and after Reset() give exactly what a fresh session gives. Requests
// refused before anything runs must change nothing. An allocator that refuses a buffer makes
// Create/Fork fail with an error (no exception, no leak) and leaves the forked session intact.
// A quarantining allocator (freed blocks are poisoned for ASan and filled with NaN, never
// reused) shows that no buffer is freed while its session lives and each is freed exactly once.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "llm/session_test_util.h"
#include "runtime/program.h"

#if defined(__SANITIZE_ADDRESS__)
#define SLM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLM_TEST_ASAN 1
#endif
#endif
#ifdef SLM_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace slm::testing {
namespace {

using llm::Session;
using llm::TailPolicy;

// Fails op `fail_op` of the `fail_call`-th Execute() (0-based) on this thread.
class FailingObserver final : public runtime::OpObserver {
 public:
  FailingObserver(int fail_call, size_t fail_op) : fail_call_(fail_call), fail_op_(fail_op) {}
  void OnOp(const runtime::Method&, size_t, const graph::Op&, int64_t, int64_t) override {}
  Status AfterOp(const runtime::Method& m, size_t index) override {
    if (index == 0) ++calls_;
    if (calls_ - 1 == fail_call_ && index == std::min(fail_op_, m.graph().ops.size() - 1)) {
      failed_in_ = m.name();
      return Internal("injected failure in op " + std::to_string(index));
    }
    return Status::Ok();
  }
  int calls() const { return calls_; }
  const std::string& failed_in() const { return failed_in_; }

 private:
  int calls_ = 0;
  const int fail_call_;
  const size_t fail_op_;
  std::string failed_in_;
};

std::unique_ptr<Session> OpenOrDie(const std::string& artifact, TailPolicy p = TailPolicy::kDecode,
                                   Allocator* alloc = nullptr) {
  llm::SessionOptions o;
  o.tail_policy = p;
  o.allocator = alloc;
  auto s = OpenSession(artifact, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Logits after feeding `tokens` into a fresh session with tail policy `p`, as two requests split
// at `split` when it is not 0: the requests and tail policy of the session compared with,
// because how a request is chunked decides which matmul path a row takes (the one-token product,
// the row tiles, the panel GEMM from two vectors of rows: 8 on NEON, 16 on AVX2, 32 on AVX-512)
// and the paths round differently; only the same requests compare bit for bit.
std::vector<float> FreshLogits(const std::string& artifact, std::span<const int32_t> tokens, size_t split = 0,
                               TailPolicy p = TailPolicy::kDecode) {
  auto s = OpenOrDie(artifact, p);
  std::vector<float> out(s->vocab_size());
  if (split > 0) {
    EXPECT_TRUE(s->Feed(tokens.first(split), out).ok());
  }
  EXPECT_TRUE(s->Feed(tokens.subspan(split), out).ok());
  return out;
}

// Every stateful call of a poisoned session fails with FailedPrecondition naming Reset(), and
// none of them changes its position.
void ExpectPoisoned(Session& s) {
  ASSERT_TRUE(s.poisoned());
  const int64_t pos = s.pos();
  std::vector<float> logits(s.vocab_size());
  const int32_t one[1] = {1};
  auto expect_refused = [&](const Status& st, const char* call) {
    EXPECT_EQ(st.code(), ErrorCode::kFailedPrecondition) << call << ": " << st.ToString();
    EXPECT_NE(st.message().find("Reset()"), std::string::npos) << call << ": " << st.ToString();
  };
  expect_refused(s.CheckCapacity(1), "CheckCapacity");
  expect_refused(s.Feed(one, logits), "Feed");
  expect_refused(s.FeedDecodeOnly(one, logits), "FeedDecodeOnly");
  expect_refused(s.FeedWithPrefixReuse(one, logits), "FeedWithPrefixReuse");
  expect_refused(s.CanRewind(0), "CanRewind");
  expect_refused(s.Rewind(0), "Rewind");
  auto fork = s.Fork();
  expect_refused(fork.status(), "Fork");
  expect_refused(s.SaveSnapshot(MakeTempDir("poisoned") + "/s.snap"), "SaveSnapshot");
  EXPECT_EQ(s.pos(), pos);
  EXPECT_TRUE(s.poisoned());
}

struct FaultCase {
  int fail_call;   // which Execute() of the request fails
  size_t fail_op;  // after which op (clamped to the method's last)
};

class SessionMidRequestFailure : public ::testing::TestWithParam<FaultCase> {};

// 39 tokens with steps {16, 4} and the decode tail: calls 16, 16, 4, 1, 1, 1.
TEST_P(SessionMidRequestFailure, PoisonsTheSessionUntilResetThenMatchesAFreshSession) {
  const std::string artifact = SmallArtifact();
  auto s = OpenOrDie(artifact);
  ASSERT_TRUE(s);
  std::vector<int32_t> prompt = TestTokens(39, s->vocab_size());
  std::vector<float> logits(s->vocab_size());
  {
    FailingObserver fail(GetParam().fail_call, GetParam().fail_op);
    runtime::ScopedOpObserver scope(&fail);
    Status st = s->Feed(prompt, logits);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(fail.calls(), GetParam().fail_call + 1) << "the request went on after the failing call";
    EXPECT_EQ(st.code(), ErrorCode::kInternal) << st.ToString();
    EXPECT_NE(st.message().find("poisoned until Reset()"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(fail.failed_in()), std::string::npos) << "the error names the failing method: " << st.ToString();
    EXPECT_NE(st.message().find("injected failure"), std::string::npos) << st.ToString();
  }
  ExpectPoisoned(*s);
  // Reset lifts the poisoning; nothing of the failed request shows.
  s->Reset(/*clear=*/false);
  EXPECT_FALSE(s->poisoned());
  EXPECT_EQ(s->pos(), 0);
  ASSERT_TRUE(s->Feed(prompt, logits).ok());
  EXPECT_TRUE(BitEqual(logits, FreshLogits(artifact, prompt)));
}

INSTANTIATE_TEST_SUITE_P(Calls, SessionMidRequestFailure,
                         ::testing::Values(FaultCase{0, 0}, FaultCase{0, 1000}, FaultCase{1, 3}, FaultCase{2, 5},
                                           FaultCase{4, 2}, FaultCase{5, 1000}),
                         [](const auto& info) {
                           return "call" + std::to_string(info.param.fail_call) + "_op" + std::to_string(info.param.fail_op);
                         });

// A sliding-window ring that has wrapped: the failing call overwrote ring slots of committed
// positions, so continuing would be silently wrong. Poisoned instead; a snapshot taken before
// the failure restores a state that continues exactly like the uninterrupted session.
TEST(SessionMidRequestFailure, WrappedRingIsPoisonedAndASnapshotRestoresItExactly) {
  const std::string artifact = CompiledArtifact(SharedDir() + "/models/zoo/mistral", {8}, 48);
  auto s = OpenOrDie(artifact, TailPolicy::kPad);
  ASSERT_TRUE(s);
  bool ring = false;
  std::string groups;
  for (const io::CacheGroup& g : s->metadata().groups) {
    ring |= g.cache_len < s->max_context_len();
    groups += " " + g.name + ":" + std::to_string(g.cache_len) + "/w" + std::to_string(g.window);
  }
  ASSERT_TRUE(ring) << "the mistral artifact should have a ring cache group; groups:" << groups;
  std::vector<int32_t> seq = TestTokens(40, s->vocab_size());
  std::span<const int32_t> all(seq);
  std::vector<float> logits(s->vocab_size()), want(s->vocab_size());
  ASSERT_TRUE(s->Feed(all.first(24), logits).ok());  // past the 12-slot ring: wrapped
  const std::string snap = MakeTempDir("fault-ring") + "/s.snap";
  ASSERT_TRUE(s->SaveSnapshot(snap).ok());
  {
    FailingObserver fail(/*fail_call=*/1, /*fail_op=*/1000);  // the second call, after all its ops
    runtime::ScopedOpObserver scope(&fail);
    ASSERT_FALSE(s->Feed(all.subspan(24, 16), logits).ok());
  }
  EXPECT_EQ(s->pos(), 32) << "the first chunk of 8 was committed before the failure";
  ExpectPoisoned(*s);
  ASSERT_TRUE(s->LoadSnapshot(snap).ok());
  EXPECT_FALSE(s->poisoned());
  EXPECT_EQ(s->pos(), 24);
  ASSERT_TRUE(s->Feed(all.subspan(24, 16), logits).ok());
  auto fresh = OpenOrDie(artifact, TailPolicy::kPad);
  ASSERT_TRUE(fresh->Feed(all.first(24), want).ok());
  ASSERT_TRUE(fresh->Feed(all.subspan(24, 16), want).ok());
  EXPECT_TRUE(BitEqual(logits, want));
}

// Errors found while checking a request, including ones that only the tail of a long request
// reveals, are found before anything runs: the session is not poisoned and is unchanged.
TEST(SessionRefusedRequest, LateArgumentErrorsChangeNothing) {
  const std::string artifact = SmallArtifact();
  auto s = OpenOrDie(artifact);
  std::vector<int32_t> seq = TestTokens(30, s->vocab_size());
  std::vector<float> logits(s->vocab_size());
  ASSERT_TRUE(s->Feed(seq, logits).ok());
  const std::vector<float> before = logits;
  std::vector<int32_t> bad_tail = seq;  // shares 30 tokens with the history, then a bad id
  bad_tail.push_back(static_cast<int32_t>(s->vocab_size()));
  std::vector<int32_t> rewinding_bad(seq.begin(), seq.begin() + 10);  // would rewind to 10 first
  rewinding_bad.push_back(-1);
  std::vector<int32_t> too_long = TestTokens(s->max_context_len() + 1, s->vocab_size());
  std::vector<int32_t> long_tail = TestTokens(s->max_context_len() - 30 + 1, s->vocab_size(), 9);
  long_tail[0] = 5;
  std::vector<float> wrong_size(s->vocab_size() + 1);
  EXPECT_EQ(s->FeedWithPrefixReuse(bad_tail, logits).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s->FeedWithPrefixReuse(rewinding_bad, logits).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s->FeedWithPrefixReuse(too_long, logits).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(s->Feed(long_tail, logits).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(s->Feed(std::span<const int32_t>(bad_tail).last(5), logits).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s->Feed(std::span<const int32_t>(seq).first(3), wrong_size).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s->FeedDecodeOnly(std::span<const int32_t>(bad_tail).last(5), logits).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(s->poisoned());
  EXPECT_EQ(s->pos(), 30);
  EXPECT_TRUE(std::equal(s->history().begin(), s->history().end(), seq.begin()));
  EXPECT_TRUE(BitEqual(logits, before)) << "a refused request wrote the caller's logits";
  // The next request behaves as if the refused ones never happened.
  std::vector<int32_t> more = TestTokens(7, s->vocab_size(), 11);
  ASSERT_TRUE(s->Feed(more, logits).ok());
  std::vector<int32_t> whole = seq;
  whole.insert(whole.end(), more.begin(), more.end());
  EXPECT_TRUE(BitEqual(logits, FreshLogits(artifact, whole, seq.size())));
}

// Refuses allocation number `fail_at` (0-based) and every one after it; counts live blocks.
class RefusingAllocator final : public Allocator {
 public:
  explicit RefusingAllocator(int64_t fail_at) : fail_at_(fail_at) {}
  void* Allocate(size_t bytes, size_t alignment) override {
    std::lock_guard<std::mutex> l(mu_);
    if (attempts_++ >= fail_at_) return nullptr;
    ++live_;
    return inner_.Allocate(bytes, alignment);
  }
  void Free(void* p, size_t bytes) override {
    std::lock_guard<std::mutex> l(mu_);
    --live_;
    inner_.Free(p, bytes);
  }
  void set_fail_at(int64_t n) { fail_at_ = n; }
  int64_t attempts() const { return attempts_; }
  int64_t live() const { return live_; }

 private:
  std::mutex mu_;
  int64_t fail_at_;
  int64_t attempts_ = 0, live_ = 0;
  AlignedHeapAllocator inner_;
};

TEST(SessionAllocatorFailure, RefusedBufferFailsCreationWithAnErrorAndFreesTheRest) {
  auto program = runtime::Program::Load(SmallArtifact());
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  int64_t needed = 0;
  {
    RefusingAllocator all(INT64_MAX);
    llm::SessionOptions o;
    o.allocator = &all;
    ASSERT_TRUE(Session::Create(*program, o).ok());
    needed = all.attempts();
  }
  ASSERT_GT(needed, 3);
  for (int64_t fail_at : {int64_t{0}, int64_t{1}, needed / 2, needed - 1}) {
    RefusingAllocator alloc(fail_at);
    llm::SessionOptions o;
    o.allocator = &alloc;
    auto s = Session::Create(*program, o);
    ASSERT_FALSE(s.ok()) << "allocation " << fail_at << " of " << needed << " was refused";
    EXPECT_EQ(s.status().code(), ErrorCode::kResourceExhausted) << s.status().ToString();
    EXPECT_NE(s.status().message().find("allocator refused"), std::string::npos) << s.status().ToString();
    EXPECT_EQ(alloc.live(), 0) << "buffers of the half-built session leaked (refused at " << fail_at << ")";
  }
}

TEST(SessionAllocatorFailure, RefusedBufferDuringForkLeavesTheOriginalIntact) {
  const std::string artifact = SmallArtifact();
  RefusingAllocator alloc(INT64_MAX);
  auto s = OpenOrDie(artifact, TailPolicy::kDecode, &alloc);
  ASSERT_TRUE(s);
  std::vector<int32_t> seq = TestTokens(33, s->vocab_size());
  std::span<const int32_t> all(seq);
  std::vector<float> logits(s->vocab_size());
  ASSERT_TRUE(s->Feed(all.first(20), logits).ok());
  const int64_t live = alloc.live();
  alloc.set_fail_at(alloc.attempts() + 5);  // the fork gets 5 buffers, then is refused
  auto f = s->Fork();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kResourceExhausted) << f.status().ToString();
  EXPECT_EQ(alloc.live(), live) << "the failed fork's buffers leaked";
  EXPECT_FALSE(s->poisoned());
  EXPECT_EQ(s->pos(), 20);
  ASSERT_TRUE(s->Feed(all.subspan(20), logits).ok());
  EXPECT_TRUE(BitEqual(logits, FreshLogits(artifact, seq, 20)));
}

// Never reuses memory: a freed block is filled with NaN, poisoned for ASan, and kept until the
// allocator dies. A use after free is then an ASan report (sanitizer build) or NaN logits.
class QuarantineAllocator final : public Allocator {
 public:
  ~QuarantineAllocator() override {
    for (auto& [p, bytes] : quarantine_) {
#ifdef SLM_TEST_ASAN
      ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#endif
      inner_.Free(p, bytes);
    }
    for (auto& [p, bytes] : live_) inner_.Free(p, bytes);
  }
  void* Allocate(size_t bytes, size_t alignment) override {
    void* p = inner_.Allocate(bytes, alignment);
    std::lock_guard<std::mutex> l(mu_);
    if (p) live_[p] = bytes;
    return p;
  }
  void Free(void* p, size_t bytes) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = live_.find(p);
    if (it == live_.end() || it->second != bytes) {
      ++bad_frees;  // double free, foreign pointer or wrong size
      return;
    }
    live_.erase(it);
    std::memset(p, 0xFF, bytes);  // 0xFFFFFFFF is a NaN
#ifdef SLM_TEST_ASAN
    ASAN_POISON_MEMORY_REGION(p, bytes);
#endif
    quarantine_[p] = bytes;
    ++frees;
  }
  std::set<void*> Live() {
    std::lock_guard<std::mutex> l(mu_);
    std::set<void*> out;
    for (auto& [p, bytes] : live_) out.insert(p);
    return out;
  }
  int64_t frees = 0, bad_frees = 0;

 private:
  std::mutex mu_;
  std::map<void*, size_t> live_, quarantine_;
  AlignedHeapAllocator inner_;
};

TEST(SessionAllocatorLifetime, BuffersLiveAsLongAsTheSessionAndAreFreedExactlyOnce) {
  const std::string artifact = SmallArtifact();
  std::vector<int32_t> seq = TestTokens(50, 512);
  std::span<const int32_t> all(seq);
  std::vector<float> want(FreshLogits(artifact, all.first(10), 0, TailPolicy::kPad));
  QuarantineAllocator alloc;
  {
    auto s = OpenOrDie(artifact, TailPolicy::kPad, &alloc);
    ASSERT_TRUE(s);
    ASSERT_GE(s->vocab_size(), 512);
    const std::set<void*> own = alloc.Live();
    std::vector<float> logits(s->vocab_size());
    ASSERT_TRUE(s->Feed(all.first(21), logits).ok());
    {
      // A fork gets its own buffers and frees exactly those when it goes.
      auto f = s->Fork();
      ASSERT_TRUE(f.ok());
      std::vector<float> fl(s->vocab_size());
      ASSERT_TRUE((*f)->Feed(all.subspan(21, 9), fl).ok());
      EXPECT_EQ(alloc.Live().size(), 2 * own.size());
    }
    EXPECT_EQ(alloc.Live(), own) << "destroying the fork freed something else, or kept something";
    const std::string snap = MakeTempDir("lifetime") + "/s.snap";
    ASSERT_TRUE(s->SaveSnapshot(snap).ok());
    ASSERT_TRUE(s->Rewind(11).ok());
    s->Reset(/*clear=*/true);
    ASSERT_TRUE(s->LoadSnapshot(snap).ok());
    s->Reset(/*clear=*/false);
    ASSERT_TRUE(s->Feed(all.first(10), logits).ok());
    EXPECT_TRUE(BitEqual(logits, want)) << "the session read freed (NaN-filled) memory";
    EXPECT_EQ(alloc.Live(), own) << "a session call freed or replaced one of its buffers";
    EXPECT_EQ(alloc.frees, static_cast<int64_t>(own.size())) << "only the fork's buffers are freed while the session lives";
  }
  EXPECT_TRUE(alloc.Live().empty()) << "buffers still live after the session was destroyed";
  EXPECT_EQ(alloc.bad_frees, 0) << "a buffer was freed twice, or with the wrong size";
}

}  // namespace
}  // namespace slm::testing

#undef SLM_TEST_ASAN  // file-local: unity builds concatenate the test files
