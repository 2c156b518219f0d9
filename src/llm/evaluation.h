// Evaluation of an artifact: perplexity over a token sequence (sliding windows of the model's
// context), and agreement of a candidate artifact's logits with a reference artifact's
// (teacher-forced on the same tokens): SQNR of the logits, SQNR of each layer's output hidden
// state, and top-1 agreement. Both run through Session::FeedDecodeOnly, one token per call, so
// they need only the decode method and hold one logits row [vocab] at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "llm/session.h"

namespace slm::llm {

struct PerplexityOptions {
  int64_t window = 0;      // tokens per window; 0 → the artifact's max context
  int64_t stride = 0;      // window start advance; 0 → window / 2. Must be in [1, window].
  int64_t max_tokens = 0;  // use only the first max_tokens tokens; 0 → all
};

struct PerplexityResult {
  double perplexity = 0;     // exp(mean NLL)
  double mean_nll = 0;       // nats per scored token
  int64_t tokens_scored = 0;
  int64_t windows = 0;
  int64_t tokens_fed = 0;    // including the re-fed overlap of each window
  double ms = 0;
  double tok_per_s = 0;      // tokens_fed / seconds
};

// HF-style strided perplexity: window w, stride s. Each window [b, min(b+w, n)) is fed from an
// empty cache; the tokens after the previous window's end are scored, each predicted from the
// window's earlier tokens (the first token of the text is never scored). `tokens` [n], n >= 2.
// The session is Reset() before each window and left reset-able; errors poison it.
Result<PerplexityResult> Perplexity(Session& session, std::span<const int32_t> tokens,
                                    const PerplexityOptions& options);

struct LayerSqnr {
  std::string layer;   // "layers.3"
  double sqnr_db = 0;  // +inf when identical
};

struct LogitsComparison {
  int64_t tokens = 0;
  double logits_sqnr_db = 0;   // 10·log10(Σ ref² / Σ (cand − ref)²); +inf when identical
  double top1_agreement = 0;   // fraction of positions where argmax(cand) == argmax(ref)
  double max_abs_diff = 0;
  std::vector<LayerSqnr> layers;  // per layer, over the layer's output hidden state
};

// Feeds `tokens` [n] (n <= both contexts, vocabularies equal) through both sessions from an
// empty cache and compares every position's logits row, plus the last output of each layer
// (values named "layers.<i>.*", matched by layer index).
Result<LogitsComparison> CompareLogits(Session& candidate, Session& reference,
                                       std::span<const int32_t> tokens);

// SQNR in dB from accumulated powers; +inf when noise is 0.
double SqnrDb(double signal_power, double noise_power);

}  // namespace slm::llm
