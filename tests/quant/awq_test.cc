// Activation-aware weight scaling (quant/awq.h): the folds leave the f32 model's function
// unchanged on every zoo architecture, the search never raises the calibration loss, and on
// stories260K AWQ-scaled 8da4w tracks the f32 model better than round to nearest on held-out
// text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>

#include "core/mapped_file.h"
#include "e2e/artifacts.h"
#include "llm/evaluation.h"
#include "llm/runner.h"
#include "quant/awq.h"
#include "quant/calibration_stats.h"
#include "quant/compile_quantized.h"
#include "quant/held_out_quality.h"

namespace slm::testing {
namespace {

std::string SampleText() {
  auto text = ReadFileToString(SharedDir() + "/data/tinystories-sample/tinystories_sample.txt");
  EXPECT_TRUE(text.ok());
  return text.ok() ? *text : std::string();
}

model::CompileOptions SmallOptions() {
  model::CompileOptions opt;
  opt.prefill_steps = {8};
  opt.max_context_len = 64;
  return opt;
}

quant::SchemeOf Int4G32Or8() {
  return [](const graph::Value& w) {
    quant::SchemeSpec s = *quant::ParseScheme("int4-g32");
    if (w.shape[1] % 32 != 0) s = *quant::ParseScheme("int8");
    return s;
  };
}

Result<quant::CalibrationStats> Calibrate(const model::PreparedCompile& prepared, const std::string& text,
                                          int64_t samples, int64_t length) {
  quant::CalibrationInput in;
  in.text = text;
  in.text_samples = samples;
  in.text_length = length;
  return quant::CollectCalibrationStats(prepared, in);
}

// Logits SQNR of `cand` against `ref` over 40 teacher-forced tokens.
double LogitsSqnrDb(const std::string& cand, const std::string& ref) {
  auto c = llm::Runner::Load(cand);
  auto r = llm::Runner::Load(ref);
  EXPECT_TRUE(c.ok() && r.ok());
  if (!c.ok() || !r.ok()) return NAN;
  const int64_t vocab = (*c)->session().vocab_size();
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < 40; ++i) ids.push_back(int32_t((i * 37 + 3) % vocab));
  auto cmp = llm::CompareLogits((*c)->session(), (*r)->session(), ids);
  EXPECT_TRUE(cmp.ok()) << cmp.status().ToString();
  return cmp.ok() ? cmp->logits_sqnr_db : NAN;
}

class AwqFolds : public ::testing::TestWithParam<const char*> {};

// α fixed at 0.5 (channel scales spread up to ~30×): the scaled f32 model must compute what the
// original does, through every fold kind the architecture has (Gemma's (1 + w) norms, Qwen2's
// v bias, grouped-query v rows, GeGLU / SwiGLU up rows).
TEST_P(AwqFolds, ScaledF32ModelComputesTheSameLogits) {
  const std::string name = GetParam();
  const std::string dir = name == "stories260K" ? Stories() : SharedDir() + "/models/zoo/" + name;
  auto prepared = model::PrepareCompile(dir, SmallOptions());
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  auto stats = Calibrate(*prepared, SampleText(), 4, 48);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const std::string tmp = MakeTempDir("awq-fold");
  ASSERT_TRUE(model::WritePreparedArtifact(*prepared, tmp + "/f32.slm").ok());

  quant::AwqOptions options;
  options.fixed_alpha = 0.5;
  auto awq = quant::ApplyAwqScaling(prepared->graphs, *stats, Int4G32Or8(), options);
  ASSERT_TRUE(awq.ok()) << awq.status().ToString();
  std::map<std::string, int> folds;
  for (const quant::AwqGroupReport& g : awq->groups) ++folds[g.fold];
  std::printf("[ AWQ FOLDS ] %s: %d rmsnorm, %d glu_up_rows, %d v_rows\n", name.c_str(), folds["rmsnorm"],
              folds["glu_up_rows"], folds["v_rows"]);
  // Every architecture folds at least its two pre-norms and its GLU per layer.
  EXPECT_GT(folds["rmsnorm"], 0);
  EXPECT_GT(folds["glu_up_rows"], 0);
  ASSERT_TRUE(model::WritePreparedArtifact(std::move(*prepared), tmp + "/awq.slm").ok());
  EXPECT_GE(LogitsSqnrDb(tmp + "/awq.slm", tmp + "/f32.slm"), 80.0);
}

INSTANTIATE_TEST_SUITE_P(Models, AwqFolds,
                         ::testing::Values("stories260K", "llama", "llama2", "mistral", "qwen2", "qwen3", "gemma",
                                           "gemma2", "gemma3", "phi3", "phi4mini"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

TEST(AwqTest, Stories260KFoldsEveryGroupOfEveryLayerAndNeverRaisesTheCalibrationLoss) {
  auto prepared = model::PrepareCompile(Stories(), SmallOptions());
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  auto stats = Calibrate(*prepared, SampleText(), 8, 48);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  auto awq = quant::ApplyAwqScaling(prepared->graphs, *stats, Int4G32Or8(), {});
  ASSERT_TRUE(awq.ok()) << awq.status().ToString();
  // 5 layers × (q/k/v ← input norm, o ← v rows, gate/up ← post-attention norm, down ← up rows).
  ASSERT_EQ(awq->groups.size(), 20u);
  double rtn = 0, scaled = 0;
  int moved = 0;
  for (const quant::AwqGroupReport& g : awq->groups) {
    EXPECT_LE(g.loss, g.rtn_loss) << g.fold_into;
    EXPECT_GE(g.alpha, 0.0);
    EXPECT_LT(g.alpha, 1.0);
    rtn += g.rtn_loss;
    scaled += g.loss;
    moved += g.alpha > 0;
  }
  EXPECT_GT(moved, 0);
  EXPECT_LT(scaled, rtn);
  EXPECT_EQ(awq->groups[0].fold, "rmsnorm");
  EXPECT_EQ(awq->groups[0].fold_into, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(awq->groups[1].fold, "v_rows");
  EXPECT_EQ(awq->groups[1].fold_into, "model.layers.0.self_attn.v_proj.weight");
  EXPECT_EQ(awq->groups[3].fold, "glu_up_rows");
  EXPECT_EQ(awq->groups[3].fold_into, "model.layers.0.mlp.up_proj.weight");
  // The scales of every scaled weight: one per input channel, shared within the group, and the
  // scaled statistics diag(1/s)·H·diag(1/s).
  for (const quant::AwqGroupReport& g : awq->groups) {
    for (const std::string& w : g.weights) {
      ASSERT_EQ(awq->input_scales.count(w), g.alpha > 0 ? 1u : 0u) << w;
      if (g.alpha == 0) continue;
      const std::vector<float>& s = awq->input_scales.at(w);
      EXPECT_EQ(s, awq->input_scales.at(g.weights[0])) << w;
      const quant::InputHessian& h = *stats->Find(w);
      ASSERT_EQ(int64_t(s.size()), h.k);
      const std::vector<double> scaled = quant::ScaledHessian(h, s);
      EXPECT_NEAR(scaled[1], h.h[1] / (double(s[0]) * s[1]), 1e-12 * std::fabs(h.h[1])) << w;
    }
  }
}

// The loss goes through a low-rank factor of H (pivoted Cholesky): with 12 calibration rows
// for K = 64 inputs H has rank ≤ 12, and the factor must still give Σ e·H·eᵀ.
TEST(AwqTest, LossOnRankDeficientStatisticsEqualsTheFullHessianForm) {
  auto prepared = model::PrepareCompile(Stories(), SmallOptions());
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  quant::CalibrationInput in;
  in.samples = {{1, 5, 9, 40, 77, 120, 3, 4, 8, 300, 12, 13}};
  in.skip_positions = 0;
  auto stats = quant::CollectCalibrationStats(*prepared, in);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const quant::InputHessian& h = *stats->Find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_EQ(h.rows, 12);
  // Expected: round to nearest of q, k, v (int4 g32, all rows), Σ e·H·eᵀ with the dense H.
  double expected = 0;
  for (const char* name : {"q_proj", "k_proj", "v_proj"}) {
    const graph::Graph& g = prepared->graphs[0];
    const graph::Value& v = g.values[size_t(g.FindValue(std::string("model.layers.0.self_attn.") + name + ".weight"))];
    const int64_t n = v.shape[0], k = v.shape[1];
    auto read = quant::ReadF32Constant(v);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    const std::vector<float>& w = *read;
    const std::vector<float> deq = quant::Dequantize(quant::QuantizeInt4Groups(w.data(), n, k, 32, false));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t a = 0; a < k; ++a) {
        for (int64_t b = 0; b < k; ++b) {
          expected += double(w[size_t(r * k + a)] - deq[size_t(r * k + a)]) * h.h[size_t(a * k + b)] *
                      double(w[size_t(r * k + b)] - deq[size_t(r * k + b)]);
        }
      }
    }
  }
  auto awq = quant::ApplyAwqScaling(prepared->graphs, *stats, Int4G32Or8(), {});
  ASSERT_TRUE(awq.ok()) << awq.status().ToString();
  ASSERT_FALSE(awq->groups.empty());
  EXPECT_EQ(awq->groups[0].fold_into, "model.layers.0.input_layernorm.weight");
  EXPECT_GT(expected, 0);
  // H is summed in f32 within blocks: its null space holds ~1e-7 noise the factor leaves out.
  EXPECT_NEAR(awq->groups[0].rtn_loss, expected, 1e-5 * expected);
}

TEST(AwqTest, MethodAwqWithoutCalibrationIsAnErrorNamingIt) {
  auto prepared = model::PrepareCompile(Stories(), SmallOptions());
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  quant::QuantConfig qc;
  qc.linear = *quant::ParseScheme("8da4w-g32");
  qc.method = quant::Method::kAwq;
  auto r = quant::QuantizeGraphs(prepared->graphs, qc, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("awq needs calibration"), std::string::npos) << r.status().message();
  EXPECT_EQ(*quant::ParseMethod("awq"), quant::Method::kAwq);
  EXPECT_EQ(*quant::ParseMethod("awq+gptq"), quant::Method::kAwqGptq);
  EXPECT_STREQ(quant::MethodName(quant::Method::kAwqGptq), "awq+gptq");
  qc.method = quant::Method::kAwqGptq;
  auto both = quant::QuantizeGraphs(prepared->graphs, qc, nullptr);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("awq+gptq needs calibration"), std::string::npos) << both.status().message();
  EXPECT_FALSE(quant::ParseMethod("awqq").ok());
}

// Calibrate on the first half of the sample, measure on the second (as the GPTQ test does): the
// whole half's perplexity, logits over its first 250 tokens.
HeldOutQuality HeldOut(const std::string& artifact, const std::string& reference, const std::string& text) {
  return MeasureHeldOut(artifact, reference, text, 0, 250);
}

TEST(AwqModelTest, Stories260K8da4wG32AwqTracksF32BetterThanRtnOnHeldOutText) {
  const std::string text = SampleText();
  size_t mid = text.find('\n', text.size() / 2);
  if (mid == std::string::npos) mid = text.size() / 2;
  const std::string calib = text.substr(0, mid), eval = text.substr(mid + 1);
  model::CompileOptions opt;
  opt.prefill_steps = {16};
  opt.max_context_len = 256;
  const std::string dir = MakeTempDir("awq-model");
  ASSERT_TRUE(model::CompileCheckpoint(Stories(), dir + "/f32.slm", opt).ok());
  quant::CalibrationInput in;
  in.text = calib;
  in.text_samples = 32;
  in.text_length = 64;
  quant::QuantConfig qc;
  qc.linear = *quant::ParseScheme("8da4w-g32");
  ASSERT_TRUE(quant::CompileQuantized(Stories(), dir + "/rtn.slm", opt, qc, {}).ok());
  qc.method = quant::Method::kAwq;
  auto awq = quant::CompileQuantized(Stories(), dir + "/awq.slm", opt, qc, in);
  ASSERT_TRUE(awq.ok()) << awq.status().ToString();
  qc.method = quant::Method::kAwqGptq;
  auto both = quant::CompileQuantized(Stories(), dir + "/awq-gptq.slm", opt, qc, in);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  for (const quant::TensorReport& t : both->quant.tensors) {
    if (t.use == "linear") {
      EXPECT_EQ(t.method, "awq+gptq") << t.name;
    }
  }
  int scaled = 0;
  for (const quant::TensorReport& t : awq->quant.tensors) {
    if (t.use != "linear") continue;
    EXPECT_EQ(t.method, "awq") << t.name;
    EXPECT_FALSE(std::isnan(t.rtn_output_sqnr_db)) << t.name;
    scaled += t.note.find("awq alpha 0.00") == std::string::npos;
  }
  EXPECT_GT(scaled, 0);
  const HeldOutQuality f32 = HeldOut(dir + "/f32.slm", dir + "/f32.slm", eval);
  const HeldOutQuality rtn = HeldOut(dir + "/rtn.slm", dir + "/f32.slm", eval);
  const HeldOutQuality scaled_q = HeldOut(dir + "/awq.slm", dir + "/f32.slm", eval);
  const HeldOutQuality both_q = HeldOut(dir + "/awq-gptq.slm", dir + "/f32.slm", eval);
  std::printf("[ AWQ ] stories260K 8da4w-g32, held-out half: ppl f32 %.4f | rtn %.4f (%+.2f%%) logits SQNR %.2f dB "
              "top-1 %.1f%% | awq %.4f (%+.2f%%) %.2f dB %.1f%% | awq+gptq %.4f (%+.2f%%) %.2f dB %.1f%%\n",
              f32.ppl, rtn.ppl, 100 * (rtn.ppl / f32.ppl - 1), rtn.logits_sqnr_db, 100 * rtn.top1, scaled_q.ppl,
              100 * (scaled_q.ppl / f32.ppl - 1), scaled_q.logits_sqnr_db, 100 * scaled_q.top1, both_q.ppl,
              100 * (both_q.ppl / f32.ppl - 1), both_q.logits_sqnr_db, 100 * both_q.top1);
  // Measured 20.92 (rtn), 21.48 (awq), 22.16 dB (awq+gptq): on this 260K-parameter model the
  // gains are small, and perplexity moves by ±1-3% when a few codes flip, so only the logits
  // SQNR is asserted.
  EXPECT_GT(scaled_q.logits_sqnr_db, rtn.logits_sqnr_db);
  EXPECT_GT(both_q.logits_sqnr_db, rtn.logits_sqnr_db + 0.5);
}

}  // namespace
}  // namespace slm::testing
