// Highway body of the prefill-shaped 8da8w product (int8 activations × int8 weights, R >= 2
// vectors of int32 lanes) for CPUs without AVX-512 VNNI, whose panel GEMM
// (matmul_q_vnni_panel.cc) the dispatch takes first.
//
// The dynamic tiles of matmul_q-inl.h load and widen every weight vector once per 4 activation
// rows and reduce every output across lanes. Here the activations are transposed once per call
// into panels of P = 2 vectors of rows, xt[panel][k/2][P] with each int32 word holding the int16
// pair (x[row, 2k'], x[row, 2k' + 1]) (zero rows past R, a zero pair element past K), and the
// weights of kM rows are widened once per block into int32 words of int16 pairs. One step of 2 k
// then broadcasts one pair per weight row and issues 2 widening multiply-adds (vpmaddwd on x86)
// against the two panel vectors: each int32 lane sums one row's products, no reductions.
//
// The int32 dots are exact (|dot| <= 127·127·K < 2^31 for K < 133 000), and each output is then
// formed exactly as the one-row tile forms it (float(dot) · x_scale · w_scale + bias), so
// prefill and decode of an artifact give identical bits — which the dynamic schemes need: the
// next layer re-quantizes its input, and any rounding difference would flip int8 codes.

#if defined(SLM_KERNELS_MATMUL_Q8_DYN_PANEL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_MATMUL_Q8_DYN_PANEL_INL_H_
#undef SLM_KERNELS_MATMUL_Q8_DYN_PANEL_INL_H_
#else
#define SLM_KERNELS_MATMUL_Q8_DYN_PANEL_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "kernels/matmul_panel-inl.h"
#include "kernels/vec_tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One 8da8w output from its exact int32 dot product: the one-row tiles (Q8DynTile) and the
// panel below both form it here, so prefill and decode give the same bits. Out of line: inlined,
// GCC contracted `product + bias` into an FMA in the panel's loop but not in the tile's (AVX2,
// AVX-512), one rounding apart — the call (one per output, beside K multiply-adds) keeps a
// single instruction sequence for both.
HWY_NOINLINE inline float Q8DynOutput(int64_t dot, float x_scale, float w_scale, const float* bias) {
  float v = float(dot) * x_scale * w_scale;
  if (bias != nullptr) v += *bias;
  return v;
}

// HWY_SCALAR's one-lane vectors cannot hold an int16 pair per int32 lane: the tiles serve it.
#if HWY_TARGET != HWY_SCALAR

// Weight rows per tile: 2·kM int32 accumulators (4·kM on targets whose widening multiply-add
// keeps odd and even products apart: NEON, SVE) + 2 x-vectors + 1 broadcast.
#if HWY_ARCH_X86 && HWY_MAX_BYTES < 64
constexpr size_t kQ8DynPanelM = 6;
#elif HWY_ARCH_X86
constexpr size_t kQ8DynPanelM = 12;
#else
constexpr size_t kQ8DynPanelM = 6;
#endif
// k-pairs per block: the block's kM weight words (12 KiB at kM = 12) and its panel slice
// (256 pairs × P words: 32 KiB on AVX-512) stay in L1; sums carry over in an int32 buffer.
constexpr size_t kQ8DynPanelKc = 256;

// Rows per panel: 2 vectors of int32 lanes.
HWY_INLINE size_t Q8DynPanelWidth() { return 2 * hn::Lanes(hn::ScalableTag<int32_t>()); }

// out[0, 2·pairs) = the int8 row src[K] widened to int16, a zero past K when K is odd: read as
// int32 words, out holds the row's int16 pairs (word k' = (src[2k'], src[2k' + 1])).
HWY_INLINE void WidenRowToPairs(const int8_t* HWY_RESTRICT src, size_t K, int16_t* HWY_RESTRICT out) {
  const hn::ScalableTag<int16_t> d16;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const size_t NL = hn::Lanes(d16);
  size_t k = 0;
  for (; k + NL <= K; k += NL) hn::StoreU(hn::PromoteTo(d16, hn::LoadU(d8, src + k)), d16, out + k);
  for (; k < K; ++k) out[k] = src[k];
  if (K % 2 != 0) out[K] = 0;
}

// acc[m][0..P) (+)= Σ_{k' < kc} pair(w[m], k') · pair(xt[k'], j) for m < kM: int32, exact.
template <size_t kM>
HWY_INLINE void Q8DynPanelTile(const uint32_t* HWY_RESTRICT xt, const uint32_t* HWY_RESTRICT wp,
                               size_t ldw, size_t kc, int32_t* HWY_RESTRICT acc, bool first) {
  const hn::ScalableTag<int32_t> d32;
  const hn::Repartition<int16_t, decltype(d32)> d16;
  using V = hn::Vec<decltype(d32)>;
  const size_t NL = hn::Lanes(d32), P = 2 * NL;
  SLM_VEC_TILE(V, a0, kM);
  SLM_VEC_TILE(V, b0, kM);
  SLM_VEC_TILE(V, a1, kM);
  SLM_VEC_TILE(V, b1, kM);
  HWY_UNROLL(12)
  for (size_t m = 0; m < kM; ++m) a0[m] = b0[m] = a1[m] = b1[m] = hn::Zero(d32);
  for (size_t k = 0; k < kc; ++k) {
    const auto x0 = hn::BitCast(d16, hn::LoadU(d32, reinterpret_cast<const int32_t*>(xt + k * P)));
    const auto x1 = hn::BitCast(d16, hn::LoadU(d32, reinterpret_cast<const int32_t*>(xt + k * P + NL)));
    HWY_UNROLL(12)
    for (size_t m = 0; m < kM; ++m) {
      const auto wb = hn::BitCast(d16, hn::Set(d32, int32_t(wp[m * ldw + k])));
      a0[m] = hn::ReorderWidenMulAccumulate(d32, x0, wb, a0[m], b0[m]);
      a1[m] = hn::ReorderWidenMulAccumulate(d32, x1, wb, a1[m], b1[m]);
    }
  }
  HWY_UNROLL(12)
  for (size_t m = 0; m < kM; ++m) {
    const V s0 = hn::RearrangeToOddPlusEven(a0[m], b0[m]);
    const V s1 = hn::RearrangeToOddPlusEven(a1[m], b1[m]);
    hn::StoreU(first ? s0 : hn::Add(hn::LoadU(d32, acc + m * P), s0), d32, acc + m * P);
    hn::StoreU(first ? s1 : hn::Add(hn::LoadU(d32, acc + m * P + NL), s1), d32, acc + m * P + NL);
  }
}

// Columns [n0, n0 + kM) for all R rows: y[r, n0 + m] = Q8DynOutput(dot, x_scale[r],
// scales[n0 + m], bias + n0 + m).
template <size_t kM>
HWY_INLINE void Q8DynPanelBlock(const uint32_t* xt, const int8_t* w, const float* x_scale,
                                const float* scales, const float* bias, float* y, size_t R, size_t K,
                                size_t N, size_t n0, uint32_t* wp, int32_t* acc) {
  const size_t P = Q8DynPanelWidth(), panels = (R + P - 1) / P, pairs = (K + 1) / 2;
  for (size_t m = 0; m < kM; ++m) {  // weight rows widened once per block into int16 pairs
    WidenRowToPairs(w + (n0 + m) * K, K, reinterpret_cast<int16_t*>(wp + m * pairs));
  }
  for (size_t k0 = 0; k0 < pairs; k0 += kQ8DynPanelKc) {
    const size_t kc = std::min(kQ8DynPanelKc, pairs - k0);
    for (size_t p = 0; p < panels; ++p) {
      Q8DynPanelTile<kM>(xt + (p * pairs + k0) * P, wp + k0, pairs, kc, acc + p * kM * P, k0 == 0);
    }
  }
  for (size_t r = 0; r < R; ++r) {
    const int32_t* a = acc + (r / P) * kM * P + r % P;
    float* yr = y + r * N + n0;
    for (size_t m = 0; m < kM; ++m) {
      yr[m] = Q8DynOutput(a[m * P], x_scale[r], scales[n0 + m], bias != nullptr ? bias + n0 + m : nullptr);
    }
  }
}

// Columns [n_begin, n_end) of y[R, N] = dequant(xq) · dequant(w)ᵀ (+ bias), R >= Q8DynPanelWidth().
HWY_NOINLINE inline void Q8DynPanelColumns(const int8_t* xq, const float* x_scale, const int8_t* w,
                                           const float* scales, const float* bias, float* y, size_t R,
                                           size_t K, size_t N, size_t n_begin, size_t n_end) {
  thread_local hwy::AlignedFreeUniquePtr<uint32_t[]> xt_buf, wp_buf, row_buf;
  thread_local hwy::AlignedFreeUniquePtr<int32_t[]> acc_buf;
  thread_local size_t xt_cap = 0, wp_cap = 0, row_cap = 0, acc_cap = 0;
  const size_t P = Q8DynPanelWidth(), panels = (R + P - 1) / P, pairs = (K + 1) / 2;
  uint32_t* xt = PanelScratch(xt_buf, xt_cap, panels * pairs * P);
  uint32_t* wp = PanelScratch(wp_buf, wp_cap, kQ8DynPanelM * pairs);
  int32_t* acc = PanelScratch(acc_buf, acc_cap, panels * kQ8DynPanelM * P);
  uint32_t* row_pairs = PanelScratch(row_buf, row_cap, pairs);
  for (size_t p = 0; p < panels; ++p) {  // transpose into int16-pair panels
    uint32_t* dst = xt + p * pairs * P;
    for (size_t j = 0; j < P; ++j) {
      const size_t r = p * P + j;
      if (r >= R) {
        for (size_t k = 0; k < pairs; ++k) dst[k * P + j] = 0;
        continue;
      }
      WidenRowToPairs(xq + r * K, K, reinterpret_cast<int16_t*>(row_pairs));
      for (size_t k = 0; k < pairs; ++k) dst[k * P + j] = row_pairs[k];
    }
  }
  size_t n = n_begin;
  for (; n + kQ8DynPanelM <= n_end; n += kQ8DynPanelM) {
    Q8DynPanelBlock<kQ8DynPanelM>(xt, w, x_scale, scales, bias, y, R, K, N, n, wp, acc);
  }
  for (; n + 2 <= n_end; n += 2) Q8DynPanelBlock<2>(xt, w, x_scale, scales, bias, y, R, K, N, n, wp, acc);
  for (; n < n_end; ++n) Q8DynPanelBlock<1>(xt, w, x_scale, scales, bias, y, R, K, N, n, wp, acc);
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_MATMUL_Q8_DYN_PANEL_INL_H_
