// Calibration-aware quantization on stories260K: activation statistics collected by running
// the f32 model, and GPTQ-quantized artifacts evaluated on held-out text (calibrate on the
// first half of the tinystories sample, measure perplexity on the second half).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <span>

#include "core/mapped_file.h"
#include "e2e/artifacts.h"
#include "llm/evaluation.h"
#include "llm/runner.h"
#include "model/compiler.h"
#include "quant/calibration_stats.h"
#include "quant/compile_quantized.h"
#include "quant/held_out_quality.h"

namespace slm::testing {
namespace {

// The sample text split at a line break near the middle: calibration | evaluation.
std::pair<std::string, std::string> SplitSample() {
  auto text = ReadFileToString(SharedDir() + "/data/tinystories-sample/tinystories_sample.txt");
  EXPECT_TRUE(text.ok());
  if (!text.ok()) return {};
  size_t mid = text->find('\n', text->size() / 2);
  if (mid == std::string::npos) mid = text->size() / 2;
  return {text->substr(0, mid), text->substr(mid + 1)};
}

model::CompileOptions Options() {
  model::CompileOptions opt;
  opt.prefill_steps = {16};
  opt.max_context_len = 256;
  return opt;
}

TEST(CalibrationStatsTest, EveryLinearWeightOfStories260KGetsStatisticsSharedBetweenWeightsOfOneInput) {
  auto prepared = model::PrepareCompile(Stories(), Options());
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  quant::CalibrationInput in;
  in.samples = {{1, 5, 9, 40, 77, 120, 3, 4, 8, 300, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}, {1, 2, 3}};
  in.skip_positions = 0;
  auto stats = quant::CollectCalibrationStats(*prepared, in);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->samples, 2);
  EXPECT_EQ(stats->tokens, 23);
  for (int layer = 0; layer < 5; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    const quant::InputHessian* q = stats->Find(p + "self_attn.q_proj.weight");
    ASSERT_NE(q, nullptr) << p;
    EXPECT_EQ(q, stats->Find(p + "self_attn.k_proj.weight"));
    EXPECT_EQ(q, stats->Find(p + "self_attn.v_proj.weight"));
    EXPECT_EQ(stats->Find(p + "mlp.gate_proj.weight"), stats->Find(p + "mlp.up_proj.weight"));
    ASSERT_NE(stats->Find(p + "mlp.down_proj.weight"), nullptr);
    EXPECT_EQ(stats->Find(p + "mlp.down_proj.weight")->k, 172);
    ASSERT_NE(stats->Find(p + "self_attn.o_proj.weight"), nullptr);
    // One row per token: the decode tail policy feeds no padding rows.
    EXPECT_EQ(q->rows, 23);
    EXPECT_GT(q->h[0], 0.0);
  }
  // Leaving out the first 4 positions: the 3-token sample drops out, the other keeps 16 rows
  // (a 16-row prefill call, then 4 decode calls).
  in.skip_positions = 4;
  auto skipped = quant::CollectCalibrationStats(*prepared, in);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_EQ(skipped->samples, 1);
  EXPECT_EQ(skipped->Find("model.layers.0.self_attn.q_proj.weight")->rows, 16);
}

// Held-out quality against the f32 artifact on the first 128 tokens of the evaluation half (one
// window: fast, and the same tokens for every artifact).
HeldOutQuality MeasureHeldOut(const std::string& artifact, const std::string& reference, const std::string& text) {
  return slm::testing::MeasureHeldOut(artifact, reference, text, 128, 128);
}

struct Comparison {
  HeldOutQuality f32, rtn, gptq;
};

// f32, RTN and GPTQ artifacts of stories260K in `scheme`; GPTQ calibrated on the first half of
// the sample, all measured on the second half. The f32 artifact, its quality and the
// calibration statistics are computed once for both schemes.
Comparison Compare(const std::string& scheme) {
  const auto [calib, eval] = SplitSample();
  const std::string dir = MakeTempDir("gptq");
  Comparison c;
  static const std::string f32 = [] {
    const std::string path = MakeTempDir("gptq-f32") + "/f32.slm";
    EXPECT_TRUE(model::CompileCheckpoint(Stories(), path, Options()).ok());
    return path;
  }();
  static const HeldOutQuality f32_quality = MeasureHeldOut(f32, f32, eval);
  static const std::optional<quant::CalibrationStats> stats = [&]() -> std::optional<quant::CalibrationStats> {
    auto prepared = model::PrepareCompile(Stories(), Options());
    EXPECT_TRUE(prepared.ok());
    if (!prepared.ok()) return std::nullopt;
    quant::CalibrationInput in;
    in.text = calib;
    in.text_samples = 32;
    in.text_length = 64;
    auto s = quant::CollectCalibrationStats(*prepared, in);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return std::nullopt;
    return std::move(*s);
  }();
  if (!stats) return c;
  auto write = [&](const quant::QuantConfig& qc, const std::string& path) -> Result<quant::QuantReport> {
    SLM_ASSIGN_OR_RETURN(model::PreparedCompile prepared, model::PrepareCompile(Stories(), Options()));
    SLM_ASSIGN_OR_RETURN(quant::QuantReport rep, quant::QuantizeGraphs(prepared.graphs, qc, &*stats));
    quant::RecordQuantization(rep, qc, prepared);
    SLM_RETURN_IF_ERROR(model::WritePreparedArtifact(std::move(prepared), path).status());
    return rep;
  };
  quant::QuantConfig qc;
  qc.linear = *quant::ParseScheme(scheme);
  auto rtn = write(qc, dir + "/rtn.slm");
  EXPECT_TRUE(rtn.ok()) << rtn.status().ToString();
  qc.method = quant::Method::kGptq;
  auto gptq = write(qc, dir + "/gptq.slm");
  EXPECT_TRUE(gptq.ok()) << gptq.status().ToString();
  if (!rtn.ok() || !gptq.ok()) return c;
  // Per tensor, on the calibration activations: GPTQ's output SQNR beats RTN's (the "before"
  // figure of its report); with rtn, before and after are the same figure.
  for (const quant::TensorReport& t : gptq->tensors) {
    EXPECT_EQ(t.method, "gptq") << t.name;
    EXPECT_GT(t.output_sqnr_db, t.rtn_output_sqnr_db) << t.name;
  }
  for (const quant::TensorReport& t : rtn->tensors) {
    EXPECT_EQ(t.method, "rtn") << t.name;
    EXPECT_EQ(t.output_sqnr_db, t.rtn_output_sqnr_db) << t.name;
  }
  c.f32 = f32_quality;
  c.rtn = MeasureHeldOut(dir + "/rtn.slm", f32, eval);
  c.gptq = MeasureHeldOut(dir + "/gptq.slm", f32, eval);
  std::printf("[ GPTQ ] stories260K %s, 128 held-out tokens: ppl f32 %.4f | rtn %.4f (%+.2f%%) logits SQNR %.2f dB "
              "top-1 %.1f%% | gptq %.4f (%+.2f%%) logits SQNR %.2f dB top-1 %.1f%%\n",
              scheme.c_str(), c.f32.ppl, c.rtn.ppl, 100 * (c.rtn.ppl / c.f32.ppl - 1), c.rtn.logits_sqnr_db,
              100 * c.rtn.top1, c.gptq.ppl, 100 * (c.gptq.ppl / c.f32.ppl - 1), c.gptq.logits_sqnr_db, 100 * c.gptq.top1);
  return c;
}

// Perplexity on a few hundred tokens moves by a few percent when a handful of codes flip, so
// the robust held-out criterion is the logits SQNR against f32 (teacher-forced, every position).
TEST(GptqModelTest, Stories260K8da4wG32GptqTracksF32BetterThanRtnOnHeldOutText) {
  const Comparison c = Compare("8da4w-g32");
  EXPECT_GT(c.gptq.logits_sqnr_db, c.rtn.logits_sqnr_db + 0.5);
  // Deterministic, but on one 128-token window: measured 16.06 (gptq) vs 16.24 (rtn), f32 15.45.
  EXPECT_LT(c.gptq.ppl, c.rtn.ppl);
  EXPECT_LT(c.gptq.ppl, c.f32.ppl * 1.08);
}

TEST(GptqModelTest, Stories260KInt8GptqTracksF32BetterThanRtnAndStaysWithinTwoPercentPerplexity) {
  const Comparison c = Compare("int8");
  EXPECT_GT(c.gptq.logits_sqnr_db, c.rtn.logits_sqnr_db + 0.5);
  EXPECT_LT(c.gptq.ppl, c.f32.ppl * 1.02);
  EXPECT_GE(c.gptq.top1, 0.95);
}

}  // namespace
}  // namespace slm::testing
