// Highway bodies of the prefill-shaped dynamic-activation products (int8 activations × int8 or
// int4 weights, R >= 2 vectors of int32 lanes) for CPUs without AVX-512 VNNI, whose panel GEMMs
// (matmul_q_vnni_panel.cc) the dispatch takes first.
//
// The dynamic tiles of matmul_q-inl.h load and widen every weight vector once per 4 activation
// rows and reduce every output across lanes. Here the activations are transposed once per call
// into panels of P = 2 vectors of rows, xt[panel][k/2][P] with each int32 word holding the int16
// pair (x[row, 2k'], x[row, 2k' + 1]) (zero rows past R, a zero pair element past K), and the
// weights of kM rows are widened once per block into int32 words of int16 pairs (int4: the codes
// in k order). One step of 2 k then broadcasts one pair per weight row and issues 2 widening
// multiply-adds (vpmaddwd on x86) against the two panel vectors: each int32 lane sums one row's
// products, no reductions.
//
// The int32 dots are exact (|dot| <= 127·127·K < 2^31 for K < 133 000), and each output is then
// formed exactly as the decode tiles form it, so prefill and decode of an artifact give identical
// bits — which the dynamic schemes need: the next layer re-quantizes its input, and any rounding
// difference would flip int8 codes.
//  - 8da8w: float(dot) · x_scale · w_scale + bias (Q8DynOutput).
//  - 8da4w: the order of quant_kernels.h (one f32 accumulator per output, one multiply-add per
//    group in group order, Q4DynFinish).

#if defined(SLM_KERNELS_MATMUL_DYN_PANEL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_MATMUL_DYN_PANEL_INL_H_
#undef SLM_KERNELS_MATMUL_DYN_PANEL_INL_H_
#else
#define SLM_KERNELS_MATMUL_DYN_PANEL_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

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

// The last step of every 8da4w output: acc · x_scale + bias (0 without one) as one multiply-add,
// in vector form in the tiles and the panel alike (fused on targets with FMA).
template <class D, class V>
HWY_INLINE V Q4DynFinish(D, V acc, V x_scale, V bias) {
  return hn::MulAdd(acc, x_scale, bias);
}

// HWY_SCALAR's one-lane vectors cannot hold an int16 pair per int32 lane: the tiles serve it.
#if HWY_TARGET != HWY_SCALAR

// Weight rows per tile: 2·kM int32 accumulators (4·kM on targets whose widening multiply-add
// keeps odd and even products apart: NEON, SVE) + 2 x-vectors + 1 broadcast.
#if HWY_ARCH_X86 && HWY_MAX_BYTES < 64
constexpr size_t kDynPanelM = 6;
#elif HWY_ARCH_X86
constexpr size_t kDynPanelM = 12;
#else
constexpr size_t kDynPanelM = 6;
#endif
// k-pairs per block: the block's kM weight words (12 KiB at kM = 12) and its panel slice
// (256 pairs × P words: 32 KiB on AVX-512) stay in L1; sums carry over in an int32 buffer.
constexpr size_t kDynPanelKc = 256;

// Rows per panel: 2 vectors of int32 lanes.
HWY_INLINE size_t DynPanelWidth() { return 2 * hn::Lanes(hn::ScalableTag<int32_t>()); }

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

// out[K] = the codes q (0..15) of one packed Q4 row (quant_kernels.h layout) in k order, widened
// to int16. Read as int32 words, out holds the row's int16 pairs.
HWY_INLINE void WidenQ4RowToPairs(const uint8_t* HWY_RESTRICT w, size_t K, int16_t* HWY_RESTRICT out) {
  const hn::CappedTag<int16_t, 16> d16;
  const hn::Rebind<uint8_t, decltype(d16)> du8;
  const size_t NL = hn::Lanes(d16);
  const auto mask = hn::Set(d16, int16_t{0x0F});
  for (size_t b = 0; b < K; b += 32) {
    for (size_t j = 0; j < 16; j += NL) {
      const auto q = hn::PromoteTo(d16, hn::LoadU(du8, w + b / 2 + j));
      hn::StoreU(hn::And(q, mask), d16, out + b + j);
      hn::StoreU(hn::ShiftRight<4>(q), d16, out + b + 16 + j);
    }
  }
}

// xt[panel][k'][P] = the int16 pairs of rows xq[R, K], P rows per panel (zero rows past R).
HWY_INLINE void TransposeToPairPanels(const int8_t* xq, size_t R, size_t K, uint32_t* xt,
                                      uint32_t* row_pairs) {
  const size_t P = DynPanelWidth(), panels = (R + P - 1) / P, pairs = (K + 1) / 2;
  for (size_t p = 0; p < panels; ++p) {
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
  const size_t P = DynPanelWidth(), panels = (R + P - 1) / P, pairs = (K + 1) / 2;
  for (size_t m = 0; m < kM; ++m) {  // weight rows widened once per block into int16 pairs
    WidenRowToPairs(w + (n0 + m) * K, K, reinterpret_cast<int16_t*>(wp + m * pairs));
  }
  for (size_t k0 = 0; k0 < pairs; k0 += kDynPanelKc) {
    const size_t kc = std::min(kDynPanelKc, pairs - k0);
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

// Columns [n_begin, n_end) of y[R, N] = dequant(xq) · dequant(w)ᵀ (+ bias), R >= DynPanelWidth().
HWY_NOINLINE inline void Q8DynPanelColumns(const int8_t* xq, const float* x_scale, const int8_t* w,
                                           const float* scales, const float* bias, float* y, size_t R,
                                           size_t K, size_t N, size_t n_begin, size_t n_end) {
  thread_local hwy::AlignedFreeUniquePtr<uint32_t[]> xt_buf, wp_buf, row_buf;
  thread_local hwy::AlignedFreeUniquePtr<int32_t[]> acc_buf;
  thread_local size_t xt_cap = 0, wp_cap = 0, row_cap = 0, acc_cap = 0;
  const size_t P = DynPanelWidth(), panels = (R + P - 1) / P, pairs = (K + 1) / 2;
  uint32_t* xt = PanelScratch(xt_buf, xt_cap, panels * pairs * P);
  uint32_t* wp = PanelScratch(wp_buf, wp_cap, kDynPanelM * pairs);
  int32_t* acc = PanelScratch(acc_buf, acc_cap, panels * kDynPanelM * P);
  TransposeToPairPanels(xq, R, K, xt, PanelScratch(row_buf, row_cap, pairs));
  size_t n = n_begin;
  for (; n + kDynPanelM <= n_end; n += kDynPanelM) {
    Q8DynPanelBlock<kDynPanelM>(xt, w, x_scale, scales, bias, y, R, K, N, n, wp, acc);
  }
  for (; n + 2 <= n_end; n += 2) Q8DynPanelBlock<2>(xt, w, x_scale, scales, bias, y, R, K, N, n, wp, acc);
  for (; n < n_end; ++n) Q8DynPanelBlock<1>(xt, w, x_scale, scales, bias, y, R, K, N, n, wp, acc);
}

template <size_t kM>
HWY_NOINLINE void Q4DynGroupDots(const uint32_t* HWY_RESTRICT xt, const uint32_t* HWY_RESTRICT wp,
                                 size_t ldw, size_t gp, int32_t* HWY_RESTRICT dots) {
  Q8DynPanelTile<kM>(xt, wp, ldw, gp, dots, /*first=*/true);
}

// For m < kM and each of the ngroups groups of gp pairs, in order, the 8da4w fold of
// quant_kernels.h per row lane: facc[m][0..P) = MulAdd(float(dot_g − 8·gs_g), scale_g, facc)
// (symmetric: offsets null) or MulAdd(float(gs_g), offset_g, MulAdd(float(dot_g), scale_g, facc)),
// dot_g the exact int32 dot over the group, gs[g][0..P) the rows' group sums.
template <size_t kM>
HWY_INLINE void Q4DynPanelTile(const uint32_t* HWY_RESTRICT xt, const uint32_t* HWY_RESTRICT wp,
                               size_t ldw, size_t gp, size_t ngroups, const int32_t* gs,
                               const float* scales, const float* offsets, size_t lds,
                               float* HWY_RESTRICT facc) {
  const hn::ScalableTag<int32_t> d32;
  const hn::Repartition<float, decltype(d32)> df;
  const size_t NL = hn::Lanes(d32), P = 2 * NL;
  HWY_ALIGN int32_t dots[kM * HWY_MAX_BYTES / 2];  // [kM][P]
  for (size_t g = 0; g < ngroups; ++g) {
    // The group's dots through the 8da8w tile, out of line, and a small buffer: folded in the
    // same loop, GCC 12 kept 10 of the 12 AVX2 accumulators on the stack (prefill 0.8x).
    Q4DynGroupDots<kM>(xt + g * gp * P, wp + g * gp, ldw, gp, dots);
    // The rows' group sums, once for the kM weight rows: 8·gs (symmetric) or float(gs).
    const auto gs0 = hn::LoadU(d32, gs + g * P), gs1 = hn::LoadU(d32, gs + g * P + NL);
    const auto e0 = hn::ShiftLeft<3>(gs0), e1 = hn::ShiftLeft<3>(gs1);
    const auto gf0 = hn::ConvertTo(df, gs0), gf1 = hn::ConvertTo(df, gs1);
    HWY_UNROLL(12)
    for (size_t m = 0; m < kM; ++m) {
      const auto vs = hn::Set(df, scales[m * lds + g]);
      float* f = facc + m * P;
      auto d0 = hn::Load(d32, dots + m * P), d1 = hn::Load(d32, dots + m * P + NL);
      if (offsets == nullptr) {
        d0 = hn::Sub(d0, e0);
        d1 = hn::Sub(d1, e1);
      }
      auto f0 = hn::MulAdd(hn::ConvertTo(df, d0), vs, hn::LoadU(df, f));
      auto f1 = hn::MulAdd(hn::ConvertTo(df, d1), vs, hn::LoadU(df, f + NL));
      if (offsets != nullptr) {
        const auto vo = hn::Set(df, offsets[m * lds + g]);
        f0 = hn::MulAdd(gf0, vo, f0);
        f1 = hn::MulAdd(gf1, vo, f1);
      }
      hn::StoreU(f0, df, f);
      hn::StoreU(f1, df, f + NL);
    }
  }
}

// Columns [n0, n0 + kM) of the 8da4w product for all R rows (K % G == 0, G even). gst: the rows'
// group sums transposed like the panels, [panel][g][P]; xs: x_scale padded to whole panels.
template <size_t kM>
HWY_INLINE void Q4DynPanelBlock(const uint32_t* xt, const int32_t* gst, const float* xs, const uint8_t* w,
                                const float* scales, const float* offsets, const float* bias, float* y,
                                size_t R, size_t K, size_t N, size_t G, size_t n0, uint32_t* wp, float* facc) {
  const hn::ScalableTag<float> df;
  const size_t NL = hn::Lanes(df), P = DynPanelWidth(), panels = (R + P - 1) / P, pairs = K / 2, gp = G / 2,
               groups = K / G;
  for (size_t m = 0; m < kM; ++m) {  // weight rows unpacked once per block into int16 pairs
    WidenQ4RowToPairs(w + (n0 + m) * (K / 2), K, reinterpret_cast<int16_t*>(wp + m * pairs));
  }
  std::fill(facc, facc + panels * kM * P, 0.0f);
  // Whole groups per k block, about kDynPanelKc pairs (one group when groups are longer).
  const size_t kc = std::max(gp, kDynPanelKc / gp * gp);
  for (size_t k0 = 0; k0 < pairs; k0 += kc) {
    const size_t ngroups = std::min(kc, pairs - k0) / gp;
    for (size_t p = 0; p < panels; ++p) {
      Q4DynPanelTile<kM>(xt + (p * pairs + k0) * P, wp + k0, pairs, gp, ngroups, gst + (p * groups + k0 / gp) * P,
                         scales + n0 * groups + k0 / gp, offsets != nullptr ? offsets + n0 * groups + k0 / gp : nullptr,
                         groups, facc + p * kM * P);
    }
  }
  HWY_ALIGN float out[HWY_MAX_BYTES / 2];  // [P]
  for (size_t p = 0; p < panels; ++p) {
    for (size_t m = 0; m < kM; ++m) {
      const auto vb = hn::Set(df, bias != nullptr ? bias[n0 + m] : 0.0f);
      for (size_t h = 0; h < P; h += NL) {
        const auto f = hn::LoadU(df, facc + (p * kM + m) * P + h);
        hn::Store(Q4DynFinish(df, f, hn::LoadU(df, xs + p * P + h), vb), df, out + h);
      }
      for (size_t j = 0; j < P && p * P + j < R; ++j) y[(p * P + j) * N + n0 + m] = out[j];
    }
  }
}

// Columns [n_begin, n_end) of y[R, N] = (xs ⊙ xq) · dequant(Q4 w)ᵀ (+ bias), R >= DynPanelWidth(),
// K % G == 0, G even.
HWY_NOINLINE inline void Q4DynPanelColumns(const int8_t* xq, const float* x_scale, const int32_t* group_sums,
                                           const uint8_t* w, const float* scales, const float* offsets,
                                           const float* bias, float* y, size_t R, size_t K, size_t N,
                                           size_t G, size_t n_begin, size_t n_end) {
  thread_local hwy::AlignedFreeUniquePtr<uint32_t[]> xt_buf, wp_buf, row_buf;
  thread_local hwy::AlignedFreeUniquePtr<int32_t[]> gs_buf;
  thread_local hwy::AlignedFreeUniquePtr<float[]> acc_buf, xs_buf;
  thread_local size_t xt_cap = 0, wp_cap = 0, row_cap = 0, gs_cap = 0, acc_cap = 0, xs_cap = 0;
  const size_t P = DynPanelWidth(), panels = (R + P - 1) / P, pairs = K / 2, groups = K / G;
  uint32_t* xt = PanelScratch(xt_buf, xt_cap, panels * pairs * P);
  uint32_t* wp = PanelScratch(wp_buf, wp_cap, kDynPanelM * pairs);
  float* facc = PanelScratch(acc_buf, acc_cap, panels * kDynPanelM * P);
  TransposeToPairPanels(xq, R, K, xt, PanelScratch(row_buf, row_cap, pairs));
  // The rows' group sums transposed like the panels and x_scale padded (zeros past R).
  int32_t* gst = PanelScratch(gs_buf, gs_cap, panels * groups * P);
  float* xs = PanelScratch(xs_buf, xs_cap, panels * P);
  for (size_t p = 0; p < panels; ++p) {
    for (size_t j = 0; j < P; ++j) {
      const size_t r = p * P + j;
      xs[p * P + j] = r < R ? x_scale[r] : 0.0f;
      for (size_t g = 0; g < groups; ++g) gst[(p * groups + g) * P + j] = r < R ? group_sums[r * groups + g] : 0;
    }
  }
  const auto block = [&](auto m_tag, size_t n) {
    Q4DynPanelBlock<decltype(m_tag)::value>(xt, gst, xs, w, scales, offsets, bias, y, R, K, N, G, n, wp, facc);
  };
  size_t n = n_begin;
  for (; n + kDynPanelM <= n_end; n += kDynPanelM) block(std::integral_constant<size_t, kDynPanelM>{}, n);
  for (; n + 2 <= n_end; n += 2) block(std::integral_constant<size_t, 2>{}, n);
  for (; n < n_end; ++n) block(std::integral_constant<size_t, 1>{}, n);
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_MATMUL_DYN_PANEL_INL_H_
