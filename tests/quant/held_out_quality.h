// Quality of a quantized artifact on held-out text against its f32 reference: perplexity and,
// teacher-forced, logits SQNR and top-1 agreement (the GPTQ and AWQ model tests).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "llm/evaluation.h"
#include "llm/runner.h"

namespace slm::testing {

struct HeldOutQuality {
  double ppl = NAN, logits_sqnr_db = NAN, top1 = NAN;
};

// Perplexity over the first `tokens` of `text` as one window (0: the whole text in the
// evaluator's default windows); logits against `reference` over the first `compare_tokens`.
inline HeldOutQuality MeasureHeldOut(const std::string& artifact, const std::string& reference, const std::string& text,
                                     size_t tokens, size_t compare_tokens) {
  HeldOutQuality q;
  auto cand = llm::Runner::Load(artifact);
  auto ref = llm::Runner::Load(reference);
  EXPECT_TRUE(cand.ok() && ref.ok());
  if (!cand.ok() || !ref.ok()) return q;
  auto ids = (*cand)->Encode(text);
  EXPECT_TRUE(ids.ok());
  if (!ids.ok()) return q;
  llm::PerplexityOptions po;
  if (tokens > 0) {
    if (ids->size() > tokens) ids->resize(tokens);
    po.window = int64_t(ids->size());
    po.stride = po.window;
  }
  auto p = llm::Perplexity((*cand)->session(), *ids, po);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (p.ok()) q.ppl = p->perplexity;
  auto c = llm::CompareLogits((*cand)->session(), (*ref)->session(),
                              std::span<const int32_t>(*ids).first(std::min(ids->size(), compare_tokens)));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (c.ok()) q.logits_sqnr_db = c->logits_sqnr_db, q.top1 = c->top1_agreement;
  return q;
}

}  // namespace slm::testing
