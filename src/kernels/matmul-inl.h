// Highway body of MatMulF32 (y = x · wᵀ), compiled once per SIMD target via matmul.cc.
//
// Both x rows and w rows are contiguous along K, so every output is a dot product. A tile of
// kR x-rows × kN w-rows keeps kR·kN vector accumulators in registers: each K-step loads kR + kN
// vectors and issues kR·kN FMAs, and each accumulator is reduced across lanes once at the end.
// Loop order is w-tile outer, x-rows inner, so a w tile (kN·K floats) is read from memory once
// and reused from cache by every row block: decode (R = 1) streams w exactly once, which is
// what a memory-bound matrix-vector product needs.

// Per-target include guard (the file is included once per target by foreach_target).
#if defined(SLM_KERNELS_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_MATMUL_INL_H_
#undef SLM_KERNELS_MATMUL_INL_H_
#else
#define SLM_KERNELS_MATMUL_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/decode_prefetch.h"
#include "kernels/matmul_panel-inl.h"
#include "kernels/vec_tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// x86 targets below AVX-512 have 16 vector registers; the rest have 32. Tiles are sized so that
// accumulators + the kR x-vectors + one w-vector fit without spilling.
#if HWY_ARCH_X86 && HWY_TARGET != HWY_AVX3 && HWY_TARGET != HWY_AVX3_DL
constexpr size_t kFourRowTileCols = 2;  // 8 acc + 4 x + 1 w = 13 registers
constexpr size_t kThreeRowTileCols = 2;
#else
constexpr size_t kFourRowTileCols = 4;  // 16 acc + 4 x + 1 w = 21 registers
constexpr size_t kThreeRowTileCols = 4;
#endif
constexpr size_t kTwoRowTileCols = 4;
constexpr size_t kOneRowTileCols = 8;  // decode: 8 independent FMA chains hide FMA latency

// y[r, c] (r < kR, c < kN) = x[r, :] · w[c, :] (+ bias[c]); y has row stride ldy.
template <size_t kR, size_t kN>
HWY_INLINE void MatMulTile(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w,
                           const float* HWY_RESTRICT bias, float* HWY_RESTRICT y, size_t K,
                           size_t ldy) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t NL = hn::Lanes(d);

  // Fully unrolled (HWY_UNROLL) so that acc/xv become registers instead of stack arrays.
  SLM_VEC_TILE2(V, acc, kR, kN);
  HWY_UNROLL(4)
  for (size_t r = 0; r < kR; ++r) {
    HWY_UNROLL(8)
    for (size_t c = 0; c < kN; ++c) acc[r][c] = hn::Zero(d);
  }
  size_t k = 0;
  for (; k + NL <= K; k += NL) {
    SLM_VEC_TILE(V, xv, kR);
    HWY_UNROLL(4)
    for (size_t r = 0; r < kR; ++r) xv[r] = hn::LoadU(d, x + r * K + k);
    HWY_UNROLL(8)
    for (size_t c = 0; c < kN; ++c) {
      // Decode streams each weight row once: prefetch the next tile's row c at this k (rows
      // are contiguous, kN rows ahead), as the quantized decode tiles do (matmul_q-inl.h).
      if constexpr (kR == 1) PrefetchDecodeLine(w + (kN + c) * K + k);
      const V wv = hn::LoadU(d, w + c * K + k);
      HWY_UNROLL(4)
      for (size_t r = 0; r < kR; ++r) acc[r][c] = hn::MulAdd(xv[r], wv, acc[r][c]);
    }
  }
  // Tail (K % lanes) in scalar: at most lanes-1 products per output, added after the reduction.
  for (size_t r = 0; r < kR; ++r) {
    for (size_t c = 0; c < kN; ++c) {
      float sum = hn::GetLane(hn::SumOfLanes(d, acc[r][c]));
      for (size_t kk = k; kk < K; ++kk) sum += x[r * K + kk] * w[c * K + kk];
      if (bias != nullptr) sum += bias[c];
      y[r * ldy + c] = sum;
    }
  }
}

// All row blocks of kR rows starting at row r0 for w rows [n_begin, n_end).
template <size_t kR, size_t kN>
HWY_INLINE void MatMulRows(const float* x, const float* w, const float* bias, float* y, size_t K,
                           size_t N, size_t r_begin, size_t r_end, size_t n_begin, size_t n_end) {
  size_t n = n_begin;
  for (; n + kN <= n_end; n += kN) {
    const float* b = bias ? bias + n : nullptr;
    for (size_t r = r_begin; r + kR <= r_end; r += kR) {
      MatMulTile<kR, kN>(x + r * K, w + n * K, b, y + r * N + n, K, N);
    }
  }
  for (; n < n_end; ++n) {  // leftover w rows, one at a time
    const float* b = bias ? bias + n : nullptr;
    for (size_t r = r_begin; r + kR <= r_end; r += kR) {
      MatMulTile<kR, 1>(x + r * K, w + n * K, b, y + r * N + n, K, N);
    }
  }
}

// The prefill path, out of line so that the decode tiles' register allocation does not share a
// function with it.
HWY_NOINLINE inline void F32PanelColumns(const float* x, const float* w, const float* bias, float* y,
                                         int64_t R, int64_t K, int64_t N, int64_t n_begin,
                                         int64_t n_end) {
  const size_t k = size_t(K);
  PanelProduct(x, bias, y, size_t(R), k, size_t(N), size_t(n_begin), size_t(n_end), w, k * sizeof(float),
               [&](size_t row, size_t) { return w + row * k; });
}

// inline: matmul_q-inl.h includes this file too (for MatMulRows), in another translation unit.
inline void MatMulF32Columns(const float* x, const float* w, const float* bias, float* y, int64_t R,
                             int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  if (size_t(R) >= PanelWidth()) return F32PanelColumns(x, w, bias, y, R, K, N, n_begin, n_end);
  const size_t rows4 = size_t(R) / 4 * 4;
  const size_t k = size_t(K), n = size_t(N), nb = size_t(n_begin), ne = size_t(n_end);
  MatMulRows<4, kFourRowTileCols>(x, w, bias, y, k, n, 0, rows4, nb, ne);
  switch (size_t(R) - rows4) {  // leftover rows as one block of 1..3 rows
    case 1: MatMulRows<1, kOneRowTileCols>(x, w, bias, y, k, n, rows4, rows4 + 1, nb, ne); break;
    case 2: MatMulRows<2, kTwoRowTileCols>(x, w, bias, y, k, n, rows4, rows4 + 2, nb, ne); break;
    case 3: MatMulRows<3, kThreeRowTileCols>(x, w, bias, y, k, n, rows4, rows4 + 3, nb, ne); break;
    default: break;
  }
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_MATMUL_INL_H_
