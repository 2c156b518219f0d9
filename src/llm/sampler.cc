#include "llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace slm::llm {
namespace {

// "%g" keeps messages short and shows nan/inf as such ("top_p must be in (0, 1], got 1.5").
std::string FormatFloat(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
  return buf;
}

Status BadParam(const char* name, const std::string& expected, const std::string& got) {
  return InvalidArgument(std::string("sampling parameter ") + name + " must be " + expected +
                         ", got " + got);
}

}  // namespace

int32_t ArgMax(std::span<const float> scores) {
  int32_t best = 0;
  for (size_t i = 1; i < scores.size(); ++i) {
    // Strict '>' keeps the lowest id on ties.
    if (scores[i] > scores[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

void ApplyRepetitionPenalty(std::span<const float> logits, std::span<const int32_t> history,
                            float penalty, std::span<float> scores) {
  std::copy(logits.begin(), logits.end(), scores.begin());
  const auto vocab = static_cast<int64_t>(logits.size());
  for (const int32_t id : history) {
    if (id < 0 || id >= vocab) continue;
    const float logit = logits[id];
    // Dividing a positive logit and multiplying a negative one both lower its probability.
    scores[id] = logit > 0.0f ? logit / penalty : logit * penalty;
  }
}

size_t SelectTopK(std::span<TokenCandidate> candidates, int32_t k) {
  if (k <= 0) return candidates.size();
  const size_t kept = std::min(candidates.size(), static_cast<size_t>(k));
  std::partial_sort(candidates.begin(), candidates.begin() + kept, candidates.end(),
                    CandidateGreater);
  return kept;
}

void SortCandidates(std::span<TokenCandidate> candidates) {
  std::sort(candidates.begin(), candidates.end(), CandidateGreater);
}

void SoftmaxInPlace(std::span<TokenCandidate> candidates) {
  if (candidates.empty()) return;
  float max_value = -std::numeric_limits<float>::infinity();
  for (const auto& c : candidates) max_value = std::max(max_value, c.value);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (max_value == kInf || max_value == -kInf) {
    // exp(inf - inf) would be NaN. +inf (e.g. a logit over a tiny temperature) takes all the
    // mass, shared by the +inf entries; all -inf prefers nothing, so the result is uniform.
    size_t count = 0;
    for (const auto& c : candidates) count += c.value == max_value;
    const float share = 1.0f / static_cast<float>(count);
    for (auto& c : candidates) c.value = c.value == max_value ? share : 0.0f;
    return;
  }
  double sum = 0.0;
  for (auto& c : candidates) {
    c.value = std::exp(c.value - max_value);
    sum += c.value;
  }
  const auto inv_sum = static_cast<float>(1.0 / sum);  // sum >= 1: the max contributes exp(0)
  for (auto& c : candidates) c.value *= inv_sum;
}

size_t TopPCut(std::span<const TokenCandidate> sorted_probs, float top_p) {
  if (top_p >= 1.0f) return sorted_probs.size();
  double cumulative = 0.0;
  for (size_t i = 0; i < sorted_probs.size(); ++i) {
    cumulative += sorted_probs[i].value;
    if (cumulative >= top_p) return i + 1;
  }
  return sorted_probs.size();
}

size_t MinPFilter(std::span<TokenCandidate> probs, float min_p) {
  if (probs.empty() || min_p <= 0.0f) return probs.size();
  float p_max = 0.0f;
  for (const auto& c : probs) p_max = std::max(p_max, c.value);
  const float threshold = min_p * p_max;
  size_t kept = 0;
  for (const auto& c : probs) {
    if (c.value >= threshold) probs[kept++] = c;  // the max always passes: kept >= 1
  }
  return kept;
}

int32_t SampleFromProbs(std::span<const TokenCandidate> probs, double u) {
  double total = 0.0;
  for (const auto& c : probs) total += c.value;
  const double target = u * total;
  double cumulative = 0.0;
  for (const auto& c : probs) {
    cumulative += c.value;
    if (target < cumulative) return c.id;
  }
  // Only reached when rounding puts target at the total: take the last token with mass, so a
  // zero-probability token is never returned.
  for (size_t i = probs.size(); i-- > 0;) {
    if (probs[i].value > 0.0f) return probs[i].id;
  }
  return probs.back().id;
}

double UniformDouble(std::mt19937_64& rng) {
  // 53 random bits fill a double's mantissa exactly: every value k * 2^-53, k < 2^53.
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

Sampler::Sampler(SamplingParams params, int32_t vocab_size)
    : params_(params),
      vocab_size_(vocab_size),
      rng_(params.seed),
      penalised_(static_cast<size_t>(std::max(vocab_size, 0))),
      candidates_(static_cast<size_t>(std::max(vocab_size, 0))) {}

void Sampler::Reseed(uint64_t seed) {
  params_.seed = seed;
  rng_.seed(seed);
}

Status Sampler::Validate() const {
  const SamplingParams& p = params_;
  if (vocab_size_ <= 0) {
    return BadParam("vocab_size", "> 0", std::to_string(vocab_size_));
  }
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature)) {
    return BadParam("temperature", "finite and >= 0", FormatFloat(p.temperature));
  }
  if (p.top_k < 0) return BadParam("top_k", ">= 0", std::to_string(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return BadParam("top_p", "in (0, 1]", FormatFloat(p.top_p));
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return BadParam("min_p", "in [0, 1]", FormatFloat(p.min_p));
  }
  if (!(p.repetition_penalty > 0.0f) || std::isinf(p.repetition_penalty)) {
    return BadParam("repetition_penalty", "finite and > 0", FormatFloat(p.repetition_penalty));
  }
  return Status::Ok();
}

const float* Sampler::PenalisedLogits(const float* logits, std::span<const int32_t> history) {
  if (params_.repetition_penalty == 1.0f || history.empty()) return logits;
  ApplyRepetitionPenalty({logits, penalised_.size()}, history, params_.repetition_penalty,
                         penalised_);
  return penalised_.data();
}

int32_t Sampler::Sample(const float* logits, std::span<const int32_t> history) {
  const float* scores = PenalisedLogits(logits, history);
  if (params_.temperature == 0.0f) return ArgMax({scores, penalised_.size()});
  return SampleStochastic(scores);
}

int32_t Sampler::SampleStochastic(const float* scores) {
  // Shifting by the max first leaves every later step unchanged (softmax and all filters are
  // shift-invariant) and keeps (logit - max) / T finite or -inf even for a tiny temperature,
  // where logit / T alone would overflow and tie the top tokens at +inf.
  const float max_score = scores[ArgMax({scores, candidates_.size()})];
  const float temperature = params_.temperature;
  for (int32_t i = 0; i < vocab_size_; ++i) {
    candidates_[i] = {i, (scores[i] - max_score) / temperature};
  }

  std::span<TokenCandidate> kept(candidates_);
  bool sorted = false;
  if (params_.top_k > 0) {
    kept = kept.first(SelectTopK(kept, params_.top_k));
    sorted = true;
  }
  SoftmaxInPlace(kept);
  if (params_.top_p < 1.0f) {
    // Sorting the whole vocabulary is the expensive step; top-k (when set) has done it already
    // on a much shorter list.
    if (!sorted) SortCandidates(kept);
    kept = kept.first(TopPCut(kept, params_.top_p));
  }
  if (params_.min_p > 0.0f) kept = kept.first(MinPFilter(kept, params_.min_p));
  return SampleFromProbs(kept, UniformDouble(rng_));
}

}  // namespace slm::llm
