// Longrope past original_max_position_embeddings (Phi-4-mini): the artifact carries the short-
// and the long-factor tables and each call picks one by its largest position, as transformers'
// per-forward longrope_frequency_update does. The zoo phi4mini config is edited to switch at 16
// so that short contexts cross it. Variants with both factor lists equal to the long (or the
// short) ones give the expected result of a call exactly: their two tables are identical.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "llm/runner.h"
#include "model/compiler.h"
#include "test_util.h"
#include "zoo_copy.h"

namespace slm::model {
namespace {

using nlohmann::json;

constexpr int64_t kSwitch = 16;
const std::vector<int32_t> kTokensAcrossSwitch = {1,  17,  300, 42, 5,  99, 250, 7,
                                                  3,  480, 11,  64, 77, 8,  123, 9,
                                                  45, 67,  89,  10, 200, 31, 2,  500};

enum class Factors { kAsIs, kBothLong, kBothShort };

std::string Checkpoint(Factors f) {
  const std::string dir = testing::CopyZooCheckpoint("phi4mini", "longrope");
  testing::EditJsonFile(dir, "config.json", [f](json& c) {
    c["original_max_position_embeddings"] = kSwitch;
    if (f == Factors::kBothLong) c["rope_scaling"]["short_factor"] = c["rope_scaling"]["long_factor"];
    if (f == Factors::kBothShort) c["rope_scaling"]["long_factor"] = c["rope_scaling"]["short_factor"];
  });
  return dir;
}

std::unique_ptr<llm::Runner> Load(Factors f, int64_t step) {
  const std::string out = testing::MakeTempDir("longrope-artifact") + "/model.slm";
  CompileOptions opt;
  opt.max_context_len = 64;  // past the switch at 16: compiled, not refused
  opt.prefill_steps = {step};
  auto report = CompileCheckpoint(Checkpoint(f), out, opt);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  llm::RunnerOptions ro;
  ro.session.tail_policy = llm::TailPolicy::kPad;
  auto r = llm::Runner::Load(out, ro);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// One decode call per token: logits [n, vocab].
std::vector<float> DecodeAll(llm::Runner& r, size_t n) {
  std::vector<float> last(r.metadata().vocab_size), all;
  Status st = r.session().FeedDecodeOnly(std::span<const int32_t>(kTokensAcrossSwitch).first(n), last, &all);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return all;
}

std::vector<float> FeedLast(llm::Runner& r, size_t n) {
  std::vector<float> last(r.metadata().vocab_size);
  Status st = r.session().Feed(std::span<const int32_t>(kTokensAcrossSwitch).first(n), last);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return last;
}

float MaxDiff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// One token per call: positions 0..15 rotate with the short factors, 16.. with the long ones.
TEST(LongRopeSwitch, OneTokenCallsSwitchTablesAtOriginalMaxPosition) {
  auto as_is = Load(Factors::kAsIs, 8), short_only = Load(Factors::kBothShort, 8);
  ASSERT_TRUE(as_is && short_only);
  const size_t V = static_cast<size_t>(as_is->metadata().vocab_size);
  const std::vector<float> got = DecodeAll(*as_is, kTokensAcrossSwitch.size());
  const std::vector<float> below = DecodeAll(*short_only, kTokensAcrossSwitch.size());
  // Identical tables below the switch: bit-identical logits.
  EXPECT_EQ(MaxDiff(got.data(), below.data(), kSwitch * V), 0.0f);
  // From position 16 the long factors rotate the new keys/queries: the logits move.
  float past = 0;
  for (size_t p = kSwitch; p < kTokensAcrossSwitch.size(); ++p) past = std::max(past, MaxDiff(&got[p * V], &below[p * V], V));
  std::printf("[ longrope ] max |Δlogit| long vs short table past the switch: %.3g\n", past);
  EXPECT_GT(past, 1e-3f);
}

// A single call whose last position passes the switch rotates every row, those below it too,
// with the long factors: it equals the same call on a model whose both tables are the long one.
TEST(LongRopeSwitch, OneCallPastTheSwitchUsesTheLongTableForAllItsRows) {
  auto as_is = Load(Factors::kAsIs, 32), long_only = Load(Factors::kBothLong, 32);
  ASSERT_TRUE(as_is && long_only);
  const size_t V = static_cast<size_t>(as_is->metadata().vocab_size);
  // 24 tokens: one padded prefill-32 call, positions 0..23.
  const std::vector<float> got = FeedLast(*as_is, 24), want = FeedLast(*long_only, 24);
  EXPECT_EQ(MaxDiff(got.data(), want.data(), V), 0.0f);
  // 16 tokens (positions 0..15): the short table, so it differs from the long-only model.
  as_is->session().Reset();
  long_only->session().Reset();
  const std::vector<float> got16 = FeedLast(*as_is, 16), long16 = FeedLast(*long_only, 16);
  EXPECT_GT(MaxDiff(got16.data(), long16.data(), V), 1e-4f);
}

// Chunked prefill whose chunks end exactly at the switch picks, chunk by chunk, the table the
// one-token path picks token by token, so both paths agree (to kernel rounding). A chunk that
// straddles the switch (HF: the whole call goes long) is call-dependent, in HF as here.
TEST(LongRopeSwitch, ChunkedPrefillAlignedWithTheSwitchAgreesWithOneTokenPath) {
  auto r = Load(Factors::kAsIs, 8);
  ASSERT_TRUE(r);
  const size_t V = static_cast<size_t>(r->metadata().vocab_size);
  const std::vector<float> chunked = FeedLast(*r, 24);  // calls 0..7, 8..15 (short), 16..23 (long)
  r->session().Reset();
  const std::vector<float> one_token = DecodeAll(*r, 24);
  const float d = MaxDiff(chunked.data(), &one_token[23 * V], V);
  std::printf("[ longrope ] chunked (step 8) vs one-token path, last logits: %.3g\n", d);
  EXPECT_LT(d, 1e-4f);

  // Straddling: 12 tokens (calls 0..7, 8..11 padded: short), then one call 12..19 (long for all).
  r->session().Reset();
  std::vector<float> last(V);
  ASSERT_TRUE(r->session().Feed(std::span<const int32_t>(kTokensAcrossSwitch).first(12), last).ok());
  ASSERT_TRUE(r->session().Feed(std::span<const int32_t>(kTokensAcrossSwitch).subspan(12, 8), last).ok());
  EXPECT_GT(MaxDiff(last.data(), &one_token[19 * V], V), 1e-4f)
      << "rows 12..15 of the straddling call must use the long table, unlike the one-token path";
}

}  // namespace
}  // namespace slm::model
