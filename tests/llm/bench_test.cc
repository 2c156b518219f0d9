// `staticlm bench` (llm::RunBench): the figures it derives from the artifact (FLOPs per token,
// bytes streamed per decode token) against closed forms from the model's config, the shape of
// its report, and its errors. Speeds themselves are not asserted (no timed tests).
#include "llm/bench.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "core/cpu_model.h"
#include "e2e/artifacts.h"
#include "hwy/targets.h"
#include "kernels/decode_prefetch.h"
#include "kernels/kernels.h"
#include "kernels/quant_kernels.h"
#include "kernels/matmul_q_amx.h"
#include "kernels/matmul_q_dotprod.h"

namespace slm::llm {
namespace {

using testing::CompiledArtifact;
using testing::Stories;

// Matmul weight elements of stories260K from its config.json: the transformer body, and the
// vocab-sized output matmul (tied to the embedding table, but a matmul all the same).
struct MatMulElements {
  double body = 0, head = 0;
};

MatMulElements StoriesMatMulElements() {
  std::ifstream f(Stories() + "/config.json");
  const nlohmann::json c = nlohmann::json::parse(f);
  const double d = c["hidden_size"], ffn = c["intermediate_size"], vocab = c["vocab_size"];
  const double hd = c["head_dim"], hq = c["num_attention_heads"], hkv = c["num_key_value_heads"];
  const double layers = c["num_hidden_layers"];
  const double per_layer = d * hq * hd      // q
                           + 2 * d * hkv * hd  // k, v
                           + hq * hd * d       // o
                           + 3 * d * ffn;      // gate, up, down
  return {layers * per_layer, vocab * d};
}

BenchOptions Quick(std::vector<int64_t> prompt_lengths) {
  BenchOptions o;
  o.threads = 1;
  o.prompt_lengths = std::move(prompt_lengths);
  o.decode_tokens = 4;
  o.repeats = 1;
  return o;
}

TEST(BenchTest, PrefillFlopsCountTheVocabMatmulOncePerChunkNotPerToken) {
  const std::string path = CompiledArtifact(Stories(), {16}, 128);
  auto r = RunBench(path, Quick({16}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const MatMulElements e = StoriesMatMulElements();
  // Decode computes logits for its one token; a prefill chunk of 16 for its selected row only.
  EXPECT_DOUBLE_EQ(r->flops_per_token, 2 * (e.body + e.head));
  EXPECT_DOUBLE_EQ(r->prefill_flops_per_token, 2 * (e.body + e.head / 16));
}

TEST(BenchTest, PrefillFlopsComeFromTheWidestPrefillMethod) {
  const std::string path = CompiledArtifact(Stories(), {8, 32}, 128);
  auto r = RunBench(path, Quick({32}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const MatMulElements e = StoriesMatMulElements();
  EXPECT_DOUBLE_EQ(r->prefill_flops_per_token, 2 * (e.body + e.head / 32));
}

TEST(BenchTest, ReportsEveryPromptLengthDecodeAndTheBytesADecodeTokenReads) {
  const std::string path = CompiledArtifact(Stories(), {16}, 128);
  auto r = RunBench(path, Quick({16, 40}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->prefill_tok_s.size(), 2u);
  EXPECT_EQ(r->prefill_tok_s[0].first, 16);
  EXPECT_EQ(r->prefill_tok_s[1].first, 40);
  for (const auto& [len, s] : r->prefill_tok_s) {
    EXPECT_GT(s.min, 0.0) << len;
    EXPECT_LE(s.min, s.median);
    EXPECT_LE(s.median, s.max);
  }
  EXPECT_GT(r->decode_tok_s.median, 0.0);
  // f32 weights: every matmul weight is streamed once per token (the tied table also serves the
  // embedding lookup, counted once), plus the RMSNorm weights (2 per layer + the final one) and
  // RoPE's inverse frequencies (head_dim / 2).
  const MatMulElements e = StoriesMatMulElements();
  const double norms = (2 * 5 + 1) * 64, inv_freq = 8 / 2;
  EXPECT_EQ(double(r->decode_weight_bytes), 4 * (e.body + e.head + norms + inv_freq));
  // KV: 5 layers × K and V × 4 kv heads × 8 floats over the mean visible positions 1 + n / 2.
  EXPECT_DOUBLE_EQ(r->decode_kv_bytes, 5 * 2 * 4 * 8 * 4.0 * (1.0 + 4 / 2.0));
  // Every streamed weight was touched, so it is resident; the huge-page share is the kernel's.
  EXPECT_GE(r->artifact_resident_bytes, r->decode_weight_bytes);
  EXPECT_LE(r->artifact_huge_page_bytes, r->artifact_resident_bytes);
  EXPECT_NE(r->ToText().find("in huge pages"), std::string::npos) << r->ToText();
  const nlohmann::json j = r->ToJson();
  EXPECT_EQ(j["artifact_resident_bytes"], r->artifact_resident_bytes);
  EXPECT_EQ(j["artifact_huge_page_bytes"], r->artifact_huge_page_bytes);
  EXPECT_TRUE(j.contains("prefill_flops_per_token"));
  EXPECT_TRUE(j["prefill_tok_s"].contains("40"));
  EXPECT_FALSE(j.contains("roofline"));  // not measured without --roofline
  // The CPU the figures were measured on (core/cpu_model.h), in the text where it is known.
  EXPECT_EQ(r->cpu, CpuModel());
  EXPECT_EQ(j["cpu"], r->cpu);
  if (!r->cpu.empty()) {
    EXPECT_NE(r->ToText().find("cpu " + r->cpu + ";"), std::string::npos) << r->ToText();
  }
  // Where the int8 decode tile prefetches (kernels/decode_prefetch.h), in the text and the JSON.
  const std::string level = kernels::Q8DecodePrefetchIntoL1() ? "L1" : "L2";
  EXPECT_EQ(r->int8_decode_prefetch, level);
  EXPECT_EQ(j["int8_decode_prefetch"], level);
  EXPECT_NE(r->ToText().find("int8 decode tile prefetches into " + level + "\n"), std::string::npos) << r->ToText();
  // Whether the int4 decode rounds x to 16 bits (kernels/quant_kernels.h): said where it does.
  EXPECT_EQ(r->int4_decode_x16, kernels::Int4DecodeX16InUse());
  EXPECT_EQ(j["int4_decode_x16"], r->int4_decode_x16);
  EXPECT_EQ(r->ToText().find("x rounded to 16 bits") != std::string::npos, r->int4_decode_x16) << r->ToText();
}

TEST(BenchTest, RejectsAPromptLongerThanTheContextNamingTheRange) {
  const std::string path = CompiledArtifact(Stories(), {16}, 128);
  auto r = RunBench(path, Quick({129}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside [1, 128]"), std::string::npos) << r.status().ToString();
}

TEST(BenchTest, RejectsZeroRepeatsAndZeroDecodeSteps) {
  const std::string path = CompiledArtifact(Stories(), {16}, 128);
  BenchOptions o = Quick({16});
  o.repeats = 0;
  EXPECT_FALSE(RunBench(path, o).ok());
  o = Quick({16});
  o.decode_tokens = 0;
  EXPECT_FALSE(RunBench(path, o).ok());
}

TEST(BenchTest, RooflineComparesEachDecodeRepeatWithTheBandwidthProbedAroundIt) {
  const std::string path = CompiledArtifact(Stories(), {16}, 128);
  BenchOptions o = Quick({16});
  o.roofline = true;
  o.roofline_seconds = 0.01;
  o.bandwidth_buffer_bytes = 4 << 20;
  for (int repeats : {1, 2, 3}) {
    o.repeats = repeats;
    auto r = RunBench(path, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    // One probe before each repeat but the first, one after the last; the best is the bound.
    ASSERT_EQ(r->bandwidth_probes_bytes_s.size(), size_t(repeats));
    const auto [lo, hi] = std::minmax_element(r->bandwidth_probes_bytes_s.begin(), r->bandwidth_probes_bytes_s.end());
    EXPECT_EQ(*hi, r->bandwidth_bytes_s);
    const double bytes = double(r->decode_weight_bytes) + r->decode_kv_bytes;
    const auto& rate = r->decode_tok_s_per_repeat;
    const auto& probe = r->bandwidth_probes_bytes_s;
    ASSERT_EQ(rate.size(), size_t(repeats));
    if (repeats == 1) {  // its only probe is the best: the two fractions are one
      EXPECT_DOUBLE_EQ(r->decode_fraction_of_paired_bound, r->decode_tok_s.median * bytes / r->bandwidth_bytes_s);
    } else {  // repeat 0: the probe after it; later repeats: the mean of the probes before and after
      std::vector<double> f = {rate[0] * bytes / probe[0]};
      for (int i = 1; i < repeats; ++i) f.push_back(rate[size_t(i)] * bytes / ((probe[size_t(i - 1)] + probe[size_t(i)]) / 2));
      std::sort(f.begin(), f.end());
      const double median = repeats == 2 ? (f[0] + f[1]) / 2 : f[1];
      EXPECT_DOUBLE_EQ(r->decode_fraction_of_paired_bound, median) << "repeats " << repeats;
    }
    EXPECT_GT(*lo, 0.0);
    const nlohmann::json j = r->ToJson();
    EXPECT_EQ(j["roofline"]["read_bandwidth_probes_gb_s"].size(), size_t(repeats));
    EXPECT_DOUBLE_EQ(j["roofline"]["decode_fraction_of_paired_bound"].get<double>(), r->decode_fraction_of_paired_bound);
    EXPECT_NE(r->ToText().find("of the bound probed around each repeat"), std::string::npos) << r->ToText();
  }
}

TEST(BenchTest, ProfileSplitsEachMethodsTimeByOpKindAndMatmulRoleOverTheWarmRepeats) {
  const std::string path = CompiledArtifact(Stories(), {16}, 128);
  BenchOptions o = Quick({32});
  o.repeats = 3;
  o.profile = true;
  auto r = RunBench(path, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->profile.size(), 2u);  // by method name: decode, prefill
  for (const MethodProfile& p : r->profile) {
    // Repeats 2 and 3 (the first pays the page faults): a 32-token prompt is 2 chunks of 16;
    // a decode repeat is its 1-token start and 4 steps.
    EXPECT_EQ(p.calls, p.method == "prefill" ? 2 * 2 : 2 * (1 + 4)) << p.method;
    double share = 0;
    std::set<std::string> ops;
    for (const auto& e : p.ops) {
      share += e.share;
      ops.insert(e.op);
      EXPECT_GE(e.ms_per_call, 0.0) << e.op;
    }
    EXPECT_NEAR(share, 1.0, 1e-9) << p.method;
    EXPECT_GT(p.ms_per_call, 0.0);
    // Every layer's projection sums into one entry, named by its weight's role.
    EXPECT_TRUE(ops.count("matmul self_attn.q_proj")) << p.method;
    EXPECT_TRUE(ops.count("matmul mlp.down_proj")) << p.method;
    EXPECT_TRUE(ops.count("attention")) << p.method;
    EXPECT_FALSE(ops.count("matmul model.layers.0.self_attn.q_proj")) << p.method;
  }
  EXPECT_NE(r->ToText().find("profile prefill: 4 calls"), std::string::npos) << r->ToText();
  EXPECT_TRUE(r->ToJson()["profile"]["decode"]["ops"].is_array());

  o.profile = false;
  auto plain = RunBench(path, o);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->profile.empty());
  EXPECT_FALSE(plain->ToJson().contains("profile"));
}

// The dispatch state a bench leaves behind: what a later bench or run would use.
std::string DispatchState() {
  return std::string(kernels::ActiveSimdTarget()) + "+" + kernels::ActiveIntrinsicBodies() + " L1 " +
         (kernels::Q8DecodePrefetchIntoL1() ? "yes" : "no") + " int4 x16 " + (kernels::Int4DecodeX16Enabled() ? "on" : "off");
}

TEST(BenchTest, AbRunsEveryRepeatWithAndWithoutTheSwitchAndReportsTheirRatios) {
  // The second-best Highway target: a switch every machine with two targets has.
  const std::vector<int64_t>& targets = kernels::SupportedSimdTargets();
  if (targets.size() < 2) GTEST_SKIP() << "one SIMD target only: nothing to switch to";
  const std::string path = CompiledArtifact(Stories(), {16}, 128);
  BenchOptions o = Quick({8, 16});
  o.repeats = 3;
  o.profile = true;
  o.ab = std::string("simd=") + hwy::TargetName(targets[1]);
  const std::string before = DispatchState();
  auto r = RunBench(path, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(DispatchState(), before) << "the defaults come back after the A/B";
  ASSERT_TRUE(r->ab.has_value());
  EXPECT_EQ(r->ab->name, o.ab);
  EXPECT_NE(r->ab->description.find(hwy::TargetName(targets[1])), std::string::npos) << r->ab->description;
  ASSERT_EQ(r->ab->prefill_tok_s.size(), 2u);
  ASSERT_EQ(r->ab->prefill_ratio.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r->ab->prefill_tok_s[i].first, o.prompt_lengths[i]);
    EXPECT_EQ(r->ab->prefill_ratio[i].first, o.prompt_lengths[i]);
    EXPECT_GT(r->ab->prefill_tok_s[i].second.min, 0.0);
    EXPECT_GT(r->ab->prefill_ratio[i].second.min, 0.0);
    EXPECT_TRUE(std::isfinite(r->ab->prefill_ratio[i].second.max));
  }
  ASSERT_EQ(r->ab->decode_tok_s_per_repeat.size(), 3u);
  ASSERT_EQ(r->decode_tok_s_per_repeat.size(), 3u);
  // The ratio's median is the median of the per-repeat B / A ratios.
  std::vector<double> ratios;
  for (size_t i = 0; i < 3; ++i) ratios.push_back(r->ab->decode_tok_s_per_repeat[i] / r->decode_tok_s_per_repeat[i]);
  std::sort(ratios.begin(), ratios.end());
  EXPECT_DOUBLE_EQ(r->ab->decode_ratio.median, ratios[1]);
  EXPECT_DOUBLE_EQ(r->ab->decode_ratio.min, ratios[0]);
  // The profile holds the default's calls only (as without --ab: repeats 2 and 3).
  for (const MethodProfile& p : r->profile) {
    if (p.method == "decode") {
      EXPECT_EQ(p.calls, 2 * (1 + 4));
    }
  }
  const std::string text = r->ToText();
  EXPECT_NE(text.find("B = --ab " + o.ab), std::string::npos) << text;
  EXPECT_NE(text.find("B decode:"), std::string::npos) << text;
  EXPECT_NE(text.find("B prefill    16 tokens:"), std::string::npos) << text;
  const nlohmann::json j = r->ToJson();
  EXPECT_EQ(j["ab"]["switch"], o.ab);
  EXPECT_TRUE(j["ab"]["decode_ratio"].contains("median"));
  EXPECT_EQ(j["ab"]["decode_tok_s"]["per_repeat"].size(), 3u);
  EXPECT_TRUE(j["ab"]["prefill_ratio"].contains("16"));

  o.ab.clear();
  o.profile = false;
  auto plain = RunBench(path, o);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->ab.has_value());
  EXPECT_FALSE(plain->ToJson().contains("ab"));
  EXPECT_EQ(plain->ToText().find("B decode:"), std::string::npos);
}

TEST(BenchTest, AbInt4X16FlipsTheInt4DecodeTileAndPutsTheDefaultBack) {
  const bool was = kernels::Int4DecodeX16Enabled();
  if (!kernels::Int4DecodeX16Applies()) GTEST_SKIP() << "no 16-bit x int4 tile here (x86 AVX2 without VNNI only)";
  const std::string path = CompiledArtifact(Stories(), {16}, 128);
  BenchOptions o = Quick({8});
  o.ab = "int4-x16";
  const std::string before = DispatchState();
  auto r = RunBench(path, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(DispatchState(), before) << "the default comes back after the A/B";
  ASSERT_TRUE(r->ab.has_value());
  EXPECT_EQ(r->ab->description, was ? "int4 decode with f32 x, not x rounded to 16 bits" : "int4 decode with x rounded to 16 bits");
}

TEST(BenchTest, AbRejectsUnknownSwitchesAndOnesThatChangeNothingHere) {
  const std::string path = CompiledArtifact(Stories(), {16}, 128);
  const std::string before = DispatchState();
  const auto error = [&](const std::string& ab) {
    BenchOptions o = Quick({8});
    o.ab = ab;
    auto r = RunBench(path, o);
    EXPECT_FALSE(r.ok()) << ab;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(error("fast").find("unknown switch 'fast'; expected l1-prefetch, vnni"), std::string::npos);
  EXPECT_NE(error("simd=NO_SUCH_TARGET").find("supported, best first"), std::string::npos);
  // The target in use already, with the same bodies: nothing to compare.
  EXPECT_NE(error(std::string("simd=") + kernels::BestSimdTarget()).find("what runs already"), std::string::npos);
  if (!kernels::AmxAvailable()) {
    EXPECT_NE(error("amx").find("nothing to compare"), std::string::npos);
  }
  if (!kernels::DotprodAvailable()) {
    EXPECT_NE(error("dotprod").find("nothing to compare"), std::string::npos);
  }
  if (!kernels::Int4DecodeX16Applies()) {
    EXPECT_NE(error("int4-x16").find("nothing to compare"), std::string::npos);
  }
  EXPECT_EQ(DispatchState(), before);
}

}  // namespace
}  // namespace slm::llm
