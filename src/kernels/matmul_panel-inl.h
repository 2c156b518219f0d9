// Highway body of the prefill-shaped f32 product y = x · wᵀ (R >= PanelWidth() rows), shared by
// MatMulF32 and the weight-only quantized products (matmul_q-inl.h), which hand it dequantized
// weight rows.
//
// The dot-product tiles of matmul-inl.h need one horizontal reduction per output and load as
// many x-vectors as w-vectors per K-step. Here x is transposed once per pass into panels of
// P = 2 vectors of rows, xt[panel][k][P] (rows past R are zeros), so one K-step of a kM × P tile
// loads 2 x-vectors, broadcasts kM weights and issues 2·kM FMAs into accumulators that already
// hold P outputs each: no reductions, and FMAs outnumber loads. Loop order per call: passes of
// at most kPanelPassBytes of x (rows), kM weight rows (read from memory once per pass, then
// from cache), K in blocks of kPanelKc, the pass's panels. Each
// K-block sums from zero in registers and is added to the earlier blocks' sums in a small
// per-thread buffer, so an output is a sum of K/kPanelKc block sums of kPanelKc products: its
// rounding error stays near the dot-product tiles' (K/lanes products per lane, then a tree),
// instead of one chain of K products.

#if defined(SLM_KERNELS_MATMUL_PANEL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_MATMUL_PANEL_INL_H_
#undef SLM_KERNELS_MATMUL_PANEL_INL_H_
#else
#define SLM_KERNELS_MATMUL_PANEL_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/vec_tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Weight rows per tile: 2·kM accumulators + 2 x-vectors + 1 broadcast must fit the registers
// (16 on x86 below AVX-512, 32 elsewhere).
#if HWY_ARCH_X86 && HWY_MAX_BYTES < 64
constexpr size_t kPanelM = 6;  // 12 acc + 2 x + 1 w = 15 registers
#else
constexpr size_t kPanelM = 12;  // 24 acc + 2 x + 1 w = 27 registers
#endif
// K-block: kM·kPanelKc weights (12 KiB at kM = 12) and one panel block (kPanelKc·P floats,
// 32 KiB on AVX-512) stay in L1. Each K-block's sums are added to the earlier blocks' in memory
// (2·kM loads, adds and stores), so short blocks cost: against 64, 256 is 9-12% faster on one
// thread (128×2048×2048, 32×2048×2048, 128×8192×2048; ABBA) and as fast as 512.
constexpr size_t kPanelKc = 256;

// Rows per panel (2 vectors): the panel path pays off from this many rows on.
HWY_INLINE size_t PanelWidth() { return 2 * hn::Lanes(hn::ScalableTag<float>()); }

// Rows of x per pass over the weights. Every block of kM weight rows streams the pass's whole
// transposed x (rows × K floats) from cache; past the cache it came from DRAM at every block,
// and 512 rows of K = 8192 (16 MiB per thread, the 1B down_proj) ran at 0.4–0.5× the speed of
// 128 rows. A pass takes at most kPanelPassBytes of x (4 MiB: 128 rows at K = 8192); each pass
// re-reads the thread's weights, which at these shapes costs far less than it saves.
// BM_MatMulF32Pool 512×8192×2048, 2 threads: 91–174 → 221–325 GFLOP/s (one pass vs 4 MiB, 3
// alternations); 128×8192×2048: 2 MiB passes 289–307, 4 MiB 328–334 GFLOP/s.
constexpr size_t kPanelPassBytes = size_t{4} << 20;
HWY_INLINE size_t PanelRowsPerPass(size_t K, size_t P) {
  return std::max(P, kPanelPassBytes / (K * sizeof(float)) / P * P);
}

// Grow-only per-thread scratch (allocates on a thread's first call needing more, never after).
template <class T>
HWY_INLINE T* PanelScratch(hwy::AlignedFreeUniquePtr<T[]>& buf, size_t& cap, size_t n) {
  if (cap < n) {
    buf = hwy::AllocateAligned<T>(n);
    cap = n;
  }
  return buf.get();
}

// xt[p][k][j] = x[p·P + j, k], zeros for rows >= R. x: [R, K]; xt: [ceil(R/P), K, P].
HWY_INLINE void TransposeToPanels(const float* HWY_RESTRICT x, size_t R, size_t K, size_t P,
                                  float* HWY_RESTRICT xt) {
  constexpr size_t kStep = 16;  // a kStep × P block of xt is written while P rows are read
  for (size_t p = 0; p * P < R; ++p) {
    float* dst = xt + p * K * P;
    const size_t rows = std::min(P, R - p * P);
    for (size_t k0 = 0; k0 < K; k0 += kStep) {
      const size_t k1 = std::min(K, k0 + kStep);
      for (size_t j = 0; j < rows; ++j) {
        const float* src = x + (p * P + j) * K;
        for (size_t k = k0; k < k1; ++k) dst[k * P + j] = src[k];
      }
      for (size_t j = rows; j < P; ++j) {
        for (size_t k = k0; k < k1; ++k) dst[k * P + j] = 0.0f;
      }
    }
  }
}

// acc[m][0..P) (+)= Σ_{k < kc} w[m·ldw + k] · xt[k][0..P) for m < kM: the block's sum starts
// from zero in registers and is then stored (`first`) or added to the earlier K-blocks' sums.
// Also prefetches `prefetch_lines` cache lines from `prefetch`, one per k.
template <size_t kM>
HWY_INLINE void PanelTile(const float* HWY_RESTRICT xt, const float* HWY_RESTRICT w, size_t ldw,
                          size_t kc, float* HWY_RESTRICT acc, bool first, const uint8_t* prefetch,
                          size_t prefetch_lines) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t NL = hn::Lanes(d), P = 2 * NL;
  SLM_VEC_TILE(V, a0, kM);
  SLM_VEC_TILE(V, a1, kM);
  HWY_UNROLL(12)
  for (size_t m = 0; m < kM; ++m) a0[m] = a1[m] = hn::Zero(d);
  for (size_t k = 0; k < kc; ++k) {
    if (k < prefetch_lines) hwy::Prefetch(prefetch + 64 * k);
    const V x0 = hn::Load(d, xt + k * P);
    const V x1 = hn::Load(d, xt + k * P + NL);
    HWY_UNROLL(12)
    for (size_t m = 0; m < kM; ++m) {
      const V wb = hn::Set(d, w[m * ldw + k]);
      a0[m] = hn::MulAdd(wb, x0, a0[m]);
      a1[m] = hn::MulAdd(wb, x1, a1[m]);
    }
  }
  HWY_UNROLL(12)
  for (size_t m = 0; m < kM; ++m) {
    hn::Store(first ? a0[m] : hn::Add(hn::Load(d, acc + m * P), a0[m]), d, acc + m * P);
    hn::Store(first ? a1[m] : hn::Add(hn::Load(d, acc + m * P + NL), a1[m]), d, acc + m * P + NL);
  }
}

// y[r, n0 + m] = Σ_k x[r, k]·w[m, k] (+ bias[n0 + m]) for m < kM and all R rows; w: kM rows of
// stride K (f32, or a dequantized slab). Meanwhile the next block's stored weights
// ([next, next + next_bytes)) are prefetched, spread over the first panel's K-blocks: a slab is
// dequantized in one burst of loads that no computation would otherwise overlap.
template <size_t kM>
HWY_INLINE void PanelBlock(const float* xt, const float* w, const float* bias, float* y, size_t R,
                           size_t K, size_t N, size_t n0, float* acc, const uint8_t* next,
                           size_t next_bytes) {
  const size_t P = PanelWidth(), panels = (R + P - 1) / P;
  const size_t k_blocks = (K + kPanelKc - 1) / kPanelKc;
  const size_t lines_per_block = (next_bytes / 64 + k_blocks) / k_blocks;  // rounded up
  for (size_t k0 = 0; k0 < K; k0 += kPanelKc) {
    const size_t kc = std::min(kPanelKc, K - k0);
    const uint8_t* pf = next + (k0 / kPanelKc) * lines_per_block * 64;
    const size_t pf_lines = pf < next + next_bytes ? lines_per_block : 0;
    for (size_t p = 0; p < panels; ++p) {
      PanelTile<kM>(xt + (p * K + k0) * P, w + k0, K, kc, acc + p * kM * P, k0 == 0, pf, p == 0 ? pf_lines : 0);
    }
  }
  // Row-major writes (kM contiguous outputs per row of y): a column-major walk would store to
  // one cache set (stride N) and evict itself.
  for (size_t r = 0; r < R; ++r) {
    const float* a = acc + (r / P) * kM * P + r % P;
    float* yr = y + r * N + n0;
    for (size_t m = 0; m < kM; ++m) yr[m] = a[m * P] + (bias != nullptr ? bias[n0 + m] : 0.0f);
  }
}

// Columns [n_begin, n_end) of y[R, N] = x[R, K] · wᵀ (+ bias). weight_rows(n, m) returns m f32
// weight rows starting at row n with stride K (the rows themselves, or a dequantized copy
// valid until the next call); `stored` holds the weights as stored, `row_bytes` per row (what
// is prefetched ahead).
template <class WeightRows>
HWY_INLINE void PanelProduct(const float* x, const float* bias, float* y, size_t R, size_t K,
                             size_t N, size_t n_begin, size_t n_end, const void* stored,
                             size_t row_bytes, WeightRows&& weight_rows) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> xt_buf, acc_buf;
  thread_local size_t xt_cap = 0, acc_cap = 0;
  const size_t P = PanelWidth();
  const size_t rows_per_pass = PanelRowsPerPass(K, P);
  const size_t max_panels = (std::min(R, rows_per_pass) + P - 1) / P;
  float* xt = PanelScratch(xt_buf, xt_cap, max_panels * K * P);
  float* acc = PanelScratch(acc_buf, acc_cap, max_panels * kPanelM * P);
  const uint8_t* base = static_cast<const uint8_t*>(stored);
  // The next block's rows: at most kPanelM, never past row N.
  auto next_bytes = [&](size_t next) { return (std::min(next + kPanelM, N) - std::min(next, N)) * row_bytes; };
  for (size_t r0 = 0; r0 < R; r0 += rows_per_pass) {
    const size_t rows = std::min(rows_per_pass, R - r0);
    const float* xr = x + r0 * K;
    float* yr = y + r0 * N;
    TransposeToPanels(xr, rows, K, P, xt);
    size_t n = n_begin;
    for (; n + kPanelM <= n_end; n += kPanelM) {
      PanelBlock<kPanelM>(xt, weight_rows(n, kPanelM), bias, yr, rows, K, N, n, acc,
                          base + (n + kPanelM) * row_bytes, next_bytes(n + kPanelM));
    }
    for (; n + 2 <= n_end; n += 2) PanelBlock<2>(xt, weight_rows(n, 2), bias, yr, rows, K, N, n, acc, base, 0);
    for (; n < n_end; ++n) PanelBlock<1>(xt, weight_rows(n, 1), bias, yr, rows, K, N, n, acc, base, 0);
  }
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_MATMUL_PANEL_INL_H_
