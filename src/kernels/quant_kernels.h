// Quantized matrix products: int8 and int4 weights, with float32 activations ("weight-only") or
// with activations quantized per row to int8 on the fly ("dynamic", 8da8w / 8da4w).
//
// Weight layouts (the artifact stores them exactly like this; quant/quantize.h writes them):
//  - Q8 (int8 per output channel, symmetric): w int8 [N, K], scales f32 [N];
//      W[n,k] ≈ scales[n] · w[n,k], w in [-127, 127].
//  - Q4 (int4 group-wise, group G ∈ {32, 64, 128}, K % G == 0): w uint8 [N, K/2], scales f32
//      [N, K/G], offsets f32 [N, K/G] or none (symmetric);
//      W[n,k] ≈ scales[n,g] · q[n,k] + offsets[n,g]  (g = k / G, q ∈ [0, 15]),
//      symmetric: offsets[n,g] = -8 · scales[n,g] (q - 8 ∈ [-8, 7]).
//    Packing: each block of 32 consecutive k (blocks never straddle a group) is 16 bytes; byte j
//    holds q[32b + j] in its low nibble and q[32b + 16 + j] in its high nibble, so one load of
//    16 bytes gives two runs of 16 consecutive k with one AND and one shift — no shuffles.
//  - Dynamic activations: each row of x is quantized symmetrically, xq = round(x / xs) ∈
//    [-127, 127], xs = max|x| / 127 (0 rows: xs = 0, xq = 0). For Q4, the per-group sums
//    gs_g = Σ_{k∈g} xq are kept too (they carry the offsets term).
//  - The 8da4w order: every body (decode tiles, panel GEMMs; Highway and AVX-512 VNNI) forms an
//    output y[r, n] with the same f32 operations, so prefill rows and one-token decode give the
//    same bits — the next layer re-quantizes its input, and a rounding difference would flip
//    int8 codes. With dot_g = Σ_{k∈g} xq[k]·q[n, k] exact in int32, acc = 0, then for each group
//    g in order: symmetric acc = fma(float(dot_g − 8·gs_g), scale_g, acc); asymmetric
//    acc = fma(float(gs_g), offset_g, fma(float(dot_g), scale_g, acc)); finally
//    y = fma(acc, xs[r], bias[n] or 0). (fma: fused where the target has FMA — SSE4 and older
//    round the product — and the same within each target.)
//
// All take a column range [n_begin, n_end) so a caller can split N over threads (including
// R = 1 decode); they write y[r, n] only for those n. bias may be null. Dispatch: Highway, like
// kernels.h; the scalar ground truth is kernels::reference::*Q* below.
#pragma once

#include <cstdint>

namespace slm::kernels {

// y[R,N] (columns n_begin..n_end) = x[R,K] · dequant(Q8 w)ᵀ (+ bias).
void MatMulQ8Columns(const float* x, const int8_t* w, const float* scales, const float* bias,
                     float* y, int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end);

// y[R,N] (columns n_begin..n_end) = x[R,K] · dequant(Q4 w)ᵀ (+ bias). offsets may be null.
void MatMulQ4Columns(const float* x, const uint8_t* w, const float* scales, const float* offsets,
                     const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                     int64_t n_begin, int64_t n_end);

// Whether MatMulQ4Columns' decode (R < 4) on x86 AVX2 CPUs without VNNI rounds x to 16 bits per
// 8 values and multiplies with `vpmaddwd` (matmul_q4_x16-inl.h) instead of multiplying f32 x. On
// Zen 2, 1B int4 decode 1.35× (docs/quantization.md), but the logits then differ from the f32
// product with the dequantized weights — from prefill and from the other SIMD targets too — by
// x's rounding: up to 4e-4 of the largest logit on the random-weight zoo models, against f32
// order's ~1e-5, which the int4 weight-only contract tests hold. So it is off unless the
// environment sets SLM_INT4_X16 (to anything but "" or "0") or a caller turns it on. No effect on
// other CPUs and targets.
bool Int4DecodeX16Enabled();
void SetInt4DecodeX16(bool enabled);
// Whether the int4 decode would take the 16-bit x tile if switched on: the active Highway target
// x86 AVX2, and no VNNI / AVX-VNNI body ahead of it (those keep f32-level precision).
bool Int4DecodeX16Applies();
// Whether it takes that tile now: switched on, and it applies.
bool Int4DecodeX16InUse();

// Per-row int8 quantization of activations: xq [R,K], xscale [R], and, when group_sums is not
// null, group_sums [R, K/G] = Σ xq over each group of G (K % G == 0).
void QuantizeRowsI8(const float* x, int8_t* xq, float* xscale, int32_t* group_sums, int64_t R,
                    int64_t K, int64_t G);

// y = (xs ⊙ xq) · dequant(Q8 w)ᵀ (+ bias), with exact int32 dot products of xq and w.
void MatMulQ8DynColumns(const int8_t* xq, const float* xscale, const int8_t* w,
                        const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                        int64_t N, int64_t n_begin, int64_t n_end);

// y = (xs ⊙ xq) · dequant(Q4 w)ᵀ (+ bias); exact int32 dot per group, then scaled in f32.
void MatMulQ4DynColumns(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                        const uint8_t* w, const float* scales, const float* offsets,
                        const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                        int64_t n_begin, int64_t n_end);

// Dequantizes rows [row_begin, row_end) of a Q8 / Q4 matrix (an embedding table) into
// out [(row_end - row_begin), K], multiplied by `multiplier`.
void DequantizeRowQ8(const int8_t* w, const float* scales, int64_t K, int64_t row, float multiplier,
                     float* out);
void DequantizeRowQ4(const uint8_t* w, const float* scales, const float* offsets, int64_t K,
                     int64_t G, int64_t row, float multiplier, float* out);

// Unpacks q[k] (0..15) of one Q4 row (K/2 bytes) — the layout's single source of truth.
inline int Q4At(const uint8_t* row, int64_t k) {
  const uint8_t b = row[(k / 32) * 16 + (k % 16)];
  return (k % 32) < 16 ? (b & 0x0F) : (b >> 4);
}

namespace reference {
// Scalar ground truth of the functions above (all columns), sums in double.
void MatMulQ8(const float* x, const int8_t* w, const float* scales, const float* bias, float* y,
              int64_t R, int64_t K, int64_t N);
void MatMulQ4(const float* x, const uint8_t* w, const float* scales, const float* offsets,
              const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G);
void QuantizeRowsI8(const float* x, int8_t* xq, float* xscale, int32_t* group_sums, int64_t R,
                    int64_t K, int64_t G);
// sums[g] = Σ xq_row[g·G .. (g+1)·G) for the K/G groups of one quantized row (exact; the SIMD
// quantizer calls it too).
void GroupSumsI8(const int8_t* xq_row, int64_t K, int64_t G, int32_t* sums);
void MatMulQ8Dyn(const int8_t* xq, const float* xscale, const int8_t* w, const float* scales,
                 const float* bias, float* y, int64_t R, int64_t K, int64_t N);
void MatMulQ4Dyn(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                 const uint8_t* w, const float* scales, const float* offsets, const float* bias,
                 float* y, int64_t R, int64_t K, int64_t N, int64_t G);
}  // namespace reference

}  // namespace slm::kernels
