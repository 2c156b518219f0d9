// Issue 7's quality targets for round to nearest on stories260K (compiled --max-context 256
// --prefill-steps 16), measured on the whole tinystories sample (1882 tokens) exactly as
// `staticlm eval --text tinystories_sample.txt --reference f32.slm` does: perplexity with
// windows of 256 tokens, stride 128; logits and hidden states teacher-forced against the f32
// artifact, here over the whole sample in 250-token pieces (more robust than ppl, which moves
// by ±1–2% when a handful of codes flip).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/mapped_file.h"
#include "e2e/artifacts.h"
#include "llm/evaluation.h"
#include "llm/runner.h"
#include "quant/compile_quantized.h"

namespace slm::testing {
namespace {

struct SampleQuality {
  double ppl = NAN, logits_sqnr_db = NAN, last_layer_sqnr_db = NAN, top1 = NAN;
};

// Mean noise power over the pieces, as dB relative to the signal (pieces have similar power).
double MeanSqnrDb(const std::vector<double>& db) {
  double noise = 0;
  for (double d : db) noise += std::pow(10.0, -d / 10.0);
  return -10.0 * std::log10(noise / double(db.size()));
}

SampleQuality MeasureOnSample(const std::string& artifact, const std::string& reference) {
  SampleQuality q;
  auto text = ReadFileToString(SharedDir() + "/data/tinystories-sample/tinystories_sample.txt");
  auto cand = llm::Runner::Load(artifact);
  auto ref = llm::Runner::Load(reference);
  EXPECT_TRUE(text.ok() && cand.ok() && ref.ok());
  if (!text.ok() || !cand.ok() || !ref.ok()) return q;
  auto ids = (*cand)->Encode(*text);
  EXPECT_TRUE(ids.ok());
  if (!ids.ok()) return q;
  auto p = llm::Perplexity((*cand)->session(), *ids, {});
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (p.ok()) q.ppl = p->perplexity;
  std::vector<double> logits, last;
  double top1 = 0;
  for (size_t b = 0; b + 2 <= ids->size(); b += 250) {
    const size_t e = std::min(ids->size(), b + 250);
    auto c = llm::CompareLogits((*cand)->session(), (*ref)->session(), std::span<const int32_t>(*ids).subspan(b, e - b));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok() || c->layers.empty()) return q;
    logits.push_back(c->logits_sqnr_db);
    last.push_back(c->layers.back().sqnr_db);
    top1 += c->top1_agreement * double(c->tokens);
  }
  q.logits_sqnr_db = MeanSqnrDb(logits);
  q.last_layer_sqnr_db = MeanSqnrDb(last);
  q.top1 = top1 / double(ids->size());
  return q;
}

const std::string& F32() {
  static const std::string path = CompiledArtifact(Stories(), {16}, 256);
  return path;
}

SampleQuality Rtn(const std::string& scheme, bool clip_search = true) {
  quant::QuantConfig qc;
  qc.linear = *quant::ParseScheme(scheme);
  qc.clip_search = clip_search;
  model::CompileOptions opt;
  opt.prefill_steps = {16};
  opt.max_context_len = 256;
  const std::string path = MakeTempDir("rtn") + "/model.slm";
  auto r = quant::CompileQuantized(Stories(), path, opt, qc, {});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  const SampleQuality q = MeasureOnSample(path, F32());
  std::printf("[ RTN ] stories260K %s%s, whole sample: ppl %.4f | logits SQNR %.2f dB | last layer %.2f dB | top-1 %.1f%%\n",
              scheme.c_str(), clip_search ? "" : " (min/max ranges)", q.ppl, q.logits_sqnr_db, q.last_layer_sqnr_db,
              100 * q.top1);
  return q;
}

double F32Perplexity() {
  static const double ppl = [] {
    const SampleQuality q = MeasureOnSample(F32(), F32());
    std::printf("[ RTN ] stories260K f32, whole sample: ppl %.4f\n", q.ppl);
    return q.ppl;
  }();
  return ppl;
}

TEST(RtnQualityTest, Int8PerplexityOfStories260KIsWithinTwoPercentOfF32) {
  EXPECT_LT(Rtn("int8").ppl, F32Perplexity() * 1.02);
}

// The 8% target is met by the asymmetric groups. Symmetric 8da4w-g32 is NOT within 8% (about
// +9–10%, with or without the range search: docs/quantization.md), so it is not asserted here.
TEST(RtnQualityTest, Asymmetric8da4wG32PerplexityOfStories260KIsWithinEightPercentOfF32) {
  EXPECT_LT(Rtn("8da4w-g32-asym").ppl, F32Perplexity() * 1.08);
}

// The range search (the default) tracks f32 better than min/max ranges over the whole sample:
// the error grows layer by layer, so the last layer's hidden state shows it most clearly.
TEST(RtnQualityTest, SearchedInt4RangesTrackF32BetterThanMinMaxOnStories260K) {
  for (const char* scheme : {"8da4w-g32", "8da4w-g32-asym"}) {
    SCOPED_TRACE(scheme);
    const SampleQuality searched = Rtn(scheme), minmax = Rtn(scheme, /*clip_search=*/false);
    EXPECT_GT(searched.last_layer_sqnr_db, minmax.last_layer_sqnr_db + 0.15);
    EXPECT_GT(searched.logits_sqnr_db, minmax.logits_sqnr_db);
  }
}

}  // namespace
}  // namespace slm::testing
