// Activation statistics for calibration-aware quantization: runs the f32 prepared model over
// calibration samples and accumulates, for every linear weight (kMatMul with a constant f32
// [N, K] weight), H = Σ xᵀx over the rows x [K] of its input (K×K, f64).
//
// Weights that read the same input value (q/k/v projections; gate/up) share one H, computed
// once. Every method of the program contributes (prefill chunks and decode steps); samples are
// fed with the decode tail policy, so no padding row ever reaches the statistics.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/compiler.h"

namespace slm::quant {

struct InputHessian {
  int64_t k = 0;
  std::vector<double> h;             // [K, K] row-major, symmetric: Σ xᵀx (f32 within blocks of 64 rows)
  std::vector<double> abs_sum;       // [K]: Σ |x| (activation-aware scaling's channel magnitudes)
  int64_t rows = 0;                  // activation rows accumulated
  std::vector<std::string> weights;  // constant names of the weights reading this input
  // Adds rows x [rows, K] (row-major f32).
  void Accumulate(const float* x, int64_t rows);
};

struct CalibrationStats {
  std::vector<InputHessian> inputs;
  std::map<std::string, size_t> by_weight;  // weight constant name → index in `inputs`
  int64_t samples = 0, tokens = 0;          // what was fed
  const InputHessian* Find(const std::string& weight) const {
    auto it = by_weight.find(weight);
    return it == by_weight.end() ? nullptr : &inputs[it->second];
  }
};

// What to feed: token-id samples, or text cut into `text_samples` consecutive windows of
// `text_length` tokens (tokenized by the model's own tokenizer, BOS as the artifact adds it;
// the whole text as one sample when it is shorter than one window).
struct CalibrationInput {
  std::vector<std::vector<int32_t>> samples;
  std::string text;
  int64_t text_samples = 8, text_length = 64;
  // Rows of positions < skip_positions (of every sample) are fed but not accumulated: the
  // first positions of a sequence carry hidden states of far larger norm than the rest
  // ("attention sinks"); with short samples they would dominate H, and GPTQ would fit the
  // first tokens at the expense of the others. Samples no longer than this are skipped.
  int64_t skip_positions = 4;
  bool empty() const { return samples.empty() && text.empty(); }
};

// Writes `prepared` (unchanged; a planned copy) to a temporary f32 artifact, runs every sample
// from position 0 (truncated to the max context), and returns the per-weight statistics. The
// temporary file is removed before returning. Errors name the sample.
Result<CalibrationStats> CollectCalibrationStats(const model::PreparedCompile& prepared,
                                                 const CalibrationInput& input);

}  // namespace slm::quant
