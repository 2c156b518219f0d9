// GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for Generative
// Pre-trained Transformers"): quantizes a linear weight column by column and, after each
// column, spreads its rounding error over the columns not yet quantized so that the layer's
// OUTPUT error on the calibration activations, ‖X(W − Ŵ)ᵀ‖², is what gets minimized rather than
// the weight error ‖W − Ŵ‖² that round-to-nearest minimizes.
//
// Input statistics: H = Σ xᵀx over the calibration rows x [K] that reached the layer (K×K,
// f64; calibration_stats.h collects them). The updates use the upper Cholesky factor U of
// (H + λI)⁻¹ (λ = percdamp · mean diag H), processed in blocks of `block_size` columns with
// lazy batch updates of the columns after the block.
//
// Output formats are exactly those of round-to-nearest (QuantizedMatrix, kernel layouts), so
// the kernels and the artifact format do not change:
//   int8 per output channel: the row scale is fixed from the original row (max|w|/127);
//   int4 group-wise (sym / asym): a group's scale (and offset) is computed when quantization
//     reaches the group's first column, from the row's values as updated by the error
//     compensation of every column before it (the reference implementation's rule).
// act_order quantizes columns in order of decreasing diag H (most active inputs first); with
// int4 groups the group parameters are then computed up front from the original weights
// ("static groups"), because the layout needs groups of contiguous original columns.
//
// Inputs never seen by the calibration (diag H = 0) keep their weights (the reference zeroes
// them: that would change the layer on data the calibration missed); their rounding error is
// simply not propagated. With H = I (no correlation between inputs) nothing is propagated and
// the result equals round-to-nearest byte for byte.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "quant/quantize.h"

namespace slm::quant {

// Quantizes w [N, K] row-major f32 with input statistics h [K, K] row-major f64 (symmetric).
// `format`: kInt8 / k8da8w → int8 per channel; kInt4 / k8da4w → int4 groups of format.group
// (K must be a multiple of the group). Deterministic: same inputs → same bytes.
// Errors: a bad format or K, or a Hessian that stays not positive definite after raising the
// dampening 5 times by 10×.
Result<QuantizedMatrix> GptqQuantize(const float* w, int64_t n, int64_t k, const double* h,
                                     const SchemeSpec& format, const GptqOptions& options);

// Output SQNR of a quantized layer on the calibration activations summarized by h [K, K]:
// 10·log10(‖XWᵀ‖² / ‖X(W − Ŵ)ᵀ‖²) = 10·log10(Σₙ wₙ H wₙᵀ / Σₙ eₙ H eₙᵀ), eₙ = wₙ − ŵₙ (rows of
// w, w_hat [N, K]). +inf when the output error is zero.
double OutputSqnrDb(const float* w, const float* w_hat, int64_t n, int64_t k, const double* h);

}  // namespace slm::quant
