// Sampler: turns one row of next-token logits into a token id.
//
// The processing order is the one Hugging Face `generate` applies (logits processor, then
// warpers): repetition penalty → temperature → top-k → top-p → min-p → draw from the
// renormalised distribution. temperature == 0 means greedy decoding: argmax of the penalised
// logits (ties → lowest id); top-k/top-p/min-p are then ignored, as HF ignores its warpers
// when do_sample=False.
//
// Determinism: the PRNG is std::mt19937_64, whose output sequence the C++ standard fixes, and
// uniform doubles are built from its raw 64-bit outputs here (the std distributions are
// implementation-defined), so a seed gives the same tokens on every platform and compiler.
//
// The filtering steps are free functions over a candidate list so they can be unit-tested on
// their own and later replaced by SIMD versions without touching the Sampler.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/status.h"

namespace slm::llm {

struct SamplingParams {
  float temperature = 0.0f;         // 0 → greedy (argmax; ties → lowest id)
  int32_t top_k = 0;                // 0 = off; keep the k most likely tokens
  float top_p = 1.0f;               // 1 = off; keep the smallest prefix with mass >= top_p
  float min_p = 0.0f;               // 0 = off; keep tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // 1 = off; HF semantics, see ApplyRepetitionPenalty
  uint64_t seed = 0;
};

// One entry of the candidate list. `value` is a logit or a probability depending on the step.
struct TokenCandidate {
  int32_t id;
  float value;
};

// Strict total order used by every sort here: larger value first, then lower id. Being total,
// it makes partial_sort / sort results independent of the standard library implementation.
inline bool CandidateGreater(const TokenCandidate& a, const TokenCandidate& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

// --- Helpers (pure, no allocation) ------------------------------------------------------------

// Index of the largest value; ties → lowest index. scores must be non-empty.
int32_t ArgMax(std::span<const float> scores);

// scores := logits, then for every id in `history` (ids outside [0, logits.size()) are ignored):
//   scores[id] = logits[id] > 0 ? logits[id] / penalty : logits[id] * penalty
// Computed from the unpenalised logit, so an id repeated in history is penalised exactly once
// (as HF's gather/scatter does). scores.size() must equal logits.size().
void ApplyRepetitionPenalty(std::span<const float> logits, std::span<const int32_t> history,
                            float penalty, std::span<float> scores);

// Keeps the k best candidates (CandidateGreater order), sorted best first, in the prefix of
// `candidates`; returns the new size (min(k, size)). k <= 0 keeps all, unsorted.
// Unlike HF, ties at the k-th value are broken by id instead of all being kept; that only
// matters for exactly equal floats.
size_t SelectTopK(std::span<TokenCandidate> candidates, int32_t k);

// Sorts candidates best first (CandidateGreater).
void SortCandidates(std::span<TokenCandidate> candidates);

// Replaces logits by softmax probabilities (max-subtracted for stability; sums to 1). -inf
// entries get probability 0; if any entry is +inf, the +inf entries share all the mass; if all
// are -inf, the result is uniform. Values must not be NaN.
void SoftmaxInPlace(std::span<TokenCandidate> candidates);

// `sorted_probs` are probabilities sorted best first. Returns the length of the smallest prefix
// whose cumulative probability is >= top_p, at least 1 (and at most the input size; the
// cumulative sum may fall short of top_p by rounding). top_p >= 1 keeps all.
size_t TopPCut(std::span<const TokenCandidate> sorted_probs, float top_p);

// Compacts `probs` in place (order kept) to the tokens with p >= min_p * max(p); returns the new
// size, always >= 1 for non-empty input. The test is scale-free, so the input need not sum to 1.
size_t MinPFilter(std::span<TokenCandidate> probs, float min_p);

// Inverse-CDF draw: u in [0, 1) is scaled by the total mass, so `probs` need not be normalised.
// Returns the id of the chosen candidate; probs must be non-empty.
int32_t SampleFromProbs(std::span<const TokenCandidate> probs, double u);

// Uniform double in [0, 1) from the top 53 bits of one raw engine output.
double UniformDouble(std::mt19937_64& rng);

// --- Sampler ------------------------------------------------------------------------------------

class Sampler {
 public:
  // Preallocates all scratch for `vocab_size` logits: Sample never allocates.
  // Call Validate() before use; Sample assumes valid parameters.
  explicit Sampler(SamplingParams params, int32_t vocab_size);

  // logits: [vocab_size] next-token logits (finite or -inf, at least one finite); not modified.
  // history: ids seen so far (prompt + generated), used only by the repetition penalty.
  // Returns a token id in [0, vocab_size).
  int32_t Sample(const float* logits, std::span<const int32_t> history);

  // Restarts the random sequence as if constructed with `seed`.
  void Reseed(uint64_t seed);

  // OK when temperature >= 0, 0 < top_p <= 1, 0 <= min_p <= 1, top_k >= 0,
  // repetition_penalty > 0 (all finite) and vocab_size > 0; otherwise kInvalidArgument naming
  // the parameter and its value.
  Status Validate() const;

  const SamplingParams& params() const { return params_; }
  int32_t vocab_size() const { return vocab_size_; }

 private:
  // Logits after the repetition penalty: `logits` itself when the penalty is off.
  const float* PenalisedLogits(const float* logits, std::span<const int32_t> history);
  int32_t SampleStochastic(const float* logits);

  SamplingParams params_;
  int32_t vocab_size_;
  std::mt19937_64 rng_;
  std::vector<float> penalised_;              // [vocab_size] scratch
  std::vector<TokenCandidate> candidates_;    // [vocab_size] scratch
};

}  // namespace slm::llm
