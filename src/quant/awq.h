// Activation-aware weight scaling (AWQ, Lin et al. 2023, "AWQ: Activation-aware Weight
// Quantization for LLM Compression and Acceleration"), applied to the f32 graphs before they
// are quantized.
//
// For a group of linear weights reading one input x [K] (q/k/v after the attention norm,
// gate/up after the MLP norm, o_proj after the attention, down_proj after the GLU), input
// channel j is scaled up by s_j in the weights and down by s_j in the op that produces x:
//   y = x·Wᵀ = (x / s)·(W·diag(s))ᵀ
// so the f32 model computes the same function while the channels that carry large
// activations get finer quantization steps. s = ā^α (ā_j = mean |x_j| on the calibration
// rows, floored at 1e-3 of the largest; normalized so that max·min = 1), α chosen on a grid of
// `grid` points in [0, 1) to minimize the group's output error on the calibration rows,
//   Σ_weights Σ_rows (w − ŵ) H (w − ŵ)ᵀ,  ŵ = dequant(quant(w·diag(s))) / s,  H = Σ xᵀx,
// with the weight's own scheme (α = 0 is round to nearest, so the search never does worse on
// this measure). Where the reference runs the whole block on cached activations, this uses H:
// the error of each linear output, not of the block output.
//
// Where 1/s goes (the producer of x; anything else and the group is left unscaled):
//   RMSNorm over the full hidden size   w / s, or (1 + w) / s − 1 for Gemma's (1 + w) form;
//   SwiGLU / GeGLU (down_proj's input)   the up_proj rows (and bias) that feed the GLU;
//   attention (o_proj's input)           the v_proj rows (and bias); with grouped-query
//                                        attention one scale per kv channel, shared by the
//                                        query heads that read it (ā averaged over them).
// The producer's output must reach only the group's weights (the GLU's only the GLU, v only
// attention / cache commits), each weight must be used once per graph and never as an
// embedding table or the lm_head, and every method must agree; otherwise the group is left as
// it is. The KV caches of a v-scaled artifact hold v / s (internal state; attention output is
// unchanged).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"
#include "quant/calibration_stats.h"
#include "quant/quantize.h"

namespace slm::quant {

struct AwqGroupReport {
  std::vector<std::string> weights;  // the group's weights (constant names)
  std::string fold;                  // "rmsnorm" | "glu_up_rows" | "v_rows"
  std::string fold_into;             // the constant that takes 1/s
  double alpha = 0;                  // chosen; 0 = unscaled
  double rtn_loss = 0, loss = 0;     // Σ (w − ŵ) H (w − ŵ)ᵀ at α = 0 and at the chosen α
};

struct AwqResult {
  // Every group searched, in op order (α = 0: left unscaled); groups with no fold are not listed.
  std::vector<AwqGroupReport> groups;
  // The input scales s [K] of every scaled weight (by constant name): the scaled model's
  // statistics of its input are ScaledHessian(H, s).
  std::map<std::string, std::vector<float>> input_scales;
  // Every weight whose values changed (the groups' weights and the rows folded into) → its
  // round-to-nearest output SQNR before scaling, and the α of its group (fold targets: NaN).
  std::map<std::string, double> rtn_output_sqnr_db;
  std::map<std::string, double> alpha;
};


// The resolved scheme a linear weight will be stored in (kNone: stays f32).
using SchemeOf = std::function<SchemeSpec(const graph::Value& weight)>;

// Rescales the f32 constants of `graphs` in place (sources replaced by owned copies; shared by
// every method) and returns the scales and report. Weights with no statistics are left as they
// are. The statistics are not copied (a 1B model's hold ~10 GB): scaled ones are made per weight.
Result<AwqResult> ApplyAwqScaling(std::vector<graph::Graph>& graphs, const CalibrationStats& stats,
                                  const SchemeOf& scheme_of, const AwqOptions& options);

// diag(1/s)·H·diag(1/s): the statistics of the input x / s, [K, K].
std::vector<double> ScaledHessian(const InputHessian& ih, const std::vector<float>& s);

}  // namespace slm::quant
