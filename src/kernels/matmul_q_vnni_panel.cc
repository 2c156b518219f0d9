// AVX-512 VNNI panel GEMMs for prefill-shaped dynamic-activation products (R >= kVnniPanelRows):
// the int8 counterpart of matmul_panel-inl.h.
//
// The tiles of matmul_q_vnni.cc compute dot products: each output needs a horizontal reduction
// and every weight vector is loaded (and, for Q4, unpacked) once per 4 activation rows. Here the
// activations are transposed once per call into panels of 32 rows, xt[panel][k/4][32][4] (the 4
// consecutive k of one row per int32 lane, zero rows past R), and a block of kM weight rows is
// unpacked once into unsigned bytes (Q8: w + 128; Q4: the nibbles in natural k order). One step
// of 4 k then broadcasts 4 weight bytes per weight row and issues 2 vpdpbusd against the two
// panel vectors: 2·kM accumulators that hold 32 outputs each, no reductions, and the weight
// unpacking is paid once per block for all R rows.
//  - Q8: Σ (w + 128)·x = Σ w·x + 128·Σx, so 128·Σx per row is subtracted at the end (exact).
//  - Q4: the int32 sums are folded into f32 accumulators once per group. From two panels on the
//    weights are unpacked as signed q − 8 and the activations transposed as unsigned x + 128
//    (the operands swap roles): scale·dot per group, and the 128·Σ (q − 8) the sums carry is a
//    per-weight-row constant removed at the end, so symmetric groups need no activation sums.
//    A single panel keeps unsigned codes: scale·dot + offset·Σ_{k∈group} x (group sums
//    transposed like the panels; offset = −8·scale when symmetric). See Q4PanelTile.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/matmul_q_vnni.h"
#include "kernels/avx512_transpose.h"
#include "kernels/vnni_intrinsics.h"
#include "kernels/vnni_panels.h"

namespace slm::kernels {

#if SLM_HAVE_VNNI_KERNELS

namespace {
using vnni::Align64;
using vnni::Dpbusd;
using vnni::GroupSumsToPanels;
using vnni::NextBlocks;
using vnni::PadToPanels;
using vnni::PanelScratch;
using vnni::Prefetch;
using vnni::Q4PanelArgs;
using vnni::Q8PanelArgs;
using vnni::SlabStride;
using vnni::TransposeQuads;
using vnni::WriteRows;
using vnni::kQ4WalkRows;

constexpr size_t kP = vnni::kQuadPanelRows;  // rows per panel: 2 vectors of 16 int32 lanes
constexpr size_t kQ8M = 12;  // weight rows per Q8 tile: 24 accumulators + 2 x + 1 broadcast
constexpr size_t kQ4M = 6;   // per Q4 tile: 12 int32 + 12 f32 accumulators + 7 operands

// a[m] += Σ_{q in [q0, q1)} w[m, 4q..4q+3] · xt[q][0..16) (w: kM rows, ldw bytes apart), b[m]
// the same for lanes 16..32.
// kSignedWeights: w is the signed operand of vpdpbusd and xt the unsigned one (Q4: q − 8 against
// x + 128); otherwise w is unsigned (Q8: w + 128) and xt signed.
template <size_t kM, bool kSignedWeights>
SLM_VNNI_TARGET inline void PanelStep(const int8_t* xt, const uint8_t* w, size_t ldw, size_t q, __m512i* a,
                                      __m512i* b) {
  const __m512i x0 = _mm512_loadu_si512(xt + q * kP * 4);
  const __m512i x1 = _mm512_loadu_si512(xt + q * kP * 4 + 64);
  #pragma GCC unroll 16
  for (size_t m = 0; m < kM; ++m) {
    int32_t quad;
    std::memcpy(&quad, w + m * ldw + 4 * q, 4);
    const __m512i wb = _mm512_set1_epi32(quad);
    a[m] = kSignedWeights ? Dpbusd(a[m], x0, wb) : Dpbusd(a[m], wb, x0);
    b[m] = kSignedWeights ? Dpbusd(b[m], x1, wb) : Dpbusd(b[m], wb, x1);
  }
}

// The steps [q0, q1) of PanelStep, one line of the next block prefetched per step.
template <size_t kM, bool kSignedWeights>
SLM_VNNI_TARGET inline void PanelSteps(const int8_t* xt, const uint8_t* w, size_t ldw, size_t q0,
                                       size_t q1, __m512i* a, __m512i* b, Prefetch pf) {
  for (size_t q = q0; q < q1; ++q) {
    pf.Lines(q, q + 1);
    PanelStep<kM, kSignedWeights>(xt, w, ldw, q, a, b);
  }
}

// Per-row factors of one panel as two vectors each (rows past R padded with zeros by the driver).
struct PanelRows {
  const int32_t* xsum;   // [32] Σ_k xq (Q8 only)
  const float* xscale;   // [32]
};

// ---- Q8 ----

// out[m][j] = (Σ_k (w[m, k] + 128)·x[j, k] − 128·Σx[j]) · xscale[j] · scale[m] + bias[m] for the
// 32 rows of one panel (w: kM unsigned rows), the epilogue in vector form over the 32 rows.
template <size_t kM>
SLM_VNNI_TARGET void Q8PanelTile(const int8_t* xt, const uint8_t* w, size_t K, size_t ldw, PanelRows rows,
                                 const float* scales, const float* bias, float* out, Prefetch pf) {
  __m512i a[kM], b[kM];
  #pragma GCC unroll 16
  for (size_t m = 0; m < kM; ++m) a[m] = b[m] = _mm512_setzero_si512();
  PanelSteps<kM, false>(xt, w, ldw, 0, K / 4, a, b, pf);
  const __m512i c0 = _mm512_slli_epi32(_mm512_loadu_si512(rows.xsum), 7);
  const __m512i c1 = _mm512_slli_epi32(_mm512_loadu_si512(rows.xsum + 16), 7);
  const __m512 xs0 = _mm512_loadu_ps(rows.xscale), xs1 = _mm512_loadu_ps(rows.xscale + 16);
  #pragma GCC unroll 16
  for (size_t m = 0; m < kM; ++m) {
    const __m512 sc = _mm512_set1_ps(scales[m]);
    const __m512 bm = _mm512_set1_ps(bias ? bias[m] : 0.0f);
    // fma(float(dot)·xscale, scale, bias or 0), as Q8Tile: the same bits as the decode path.
    const __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a[m], c0)), xs0);
    const __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(b[m], c1)), xs1);
    _mm512_storeu_ps(out + m * kP, _mm512_fmadd_ps(v0, sc, bm));
    _mm512_storeu_ps(out + m * kP + 16, _mm512_fmadd_ps(v1, sc, bm));
  }
}

// Columns [n, n + kM) for all R rows.
template <size_t kM>
SLM_VNNI_TARGET void Q8PanelBlock(const Q8PanelArgs& s, size_t n) {
  const __m512i flip = _mm512_set1_epi8(int8_t(0x80));
  for (size_t c = 0; c < kM; ++c) {
    const int8_t* src = s.w + (n + c) * s.K;
    for (size_t k = 0; k < s.K; k += 64) {
      _mm512_storeu_si512(s.slab + c * SlabStride(s.K) + k, _mm512_xor_si512(_mm512_loadu_si512(src + k), flip));
    }
  }
  // The next block's rows follow this one's in memory (rows past the end are never loaded:
  // prefetches do not fault, but the range is clipped to the matrix anyway).
  const size_t left = (s.N - n - kM) * s.K, panels = (s.R + kP - 1) / kP;
  const Prefetch next{reinterpret_cast<const uint8_t*>(s.w + (n + kM) * s.K), std::min(left, kM * s.K)};
  for (size_t p = 0; p < panels; ++p) {
    Q8PanelTile<kM>(s.xt + p * kP * s.K, s.slab, s.K, SlabStride(s.K), PanelRows{s.xsum + p * kP, s.xscale + p * kP},
                    s.scales + n, s.bias ? s.bias + n : nullptr, s.out, p + 1 == panels ? next : Prefetch{});
    WriteRows<kP, kM>(s.out, p, s.R, s.N, n, s.y);
  }
}

// ---- Q4 ----

// out[m][j] for the 32 rows of one panel, formed in the 8da4w order of quant_kernels.h (the decode
// tiles' order, so prefill and decode give the same bits): per group an exact int32 dot, folded
// into f32 in group order, then fma(acc, xscale, bias). The dot comes in one of two forms:
//  - kSigned: w holds kM rows of q − 8 as signed bytes and xt the activations as unsigned
//    x + 128: Σ (q − 8)·(x + 128) = Σ (q − 8)·x + 128·Σ (q − 8), the second part per weight row
//    and group (−qstart, from the unpack) and removed in int32. Symmetric groups need no
//    activation sums; asymmetric ones add 8·gs back (Σ q·x = Σ (q − 8)·x + 8·Σ x).
//  - otherwise: w holds the codes q (unsigned), xt x (signed): Σ q·x, minus 8·gs when symmetric.
//    No per-row correction: cheaper when the block is used by a single panel.
// The integer corrections are the accumulators' start values, not subtractions after the steps
// (the same integers). kG > 0: the group size known at compile time, its kG / 4 steps unrolled.
// Both because the fold, not the vpdpbusd, set the pace: a G = 32 group's 96 vpdpbusd came with
// ~250 other instructions (step loop control, per-step prefetch test, 24 integer corrections);
// at about 5 per cycle that is more cycles than the vpdpbusd take at 2 per cycle.
// gs: the group sums of the panel's rows, [groups][32] (unused when kSigned and symmetric).
template <size_t kM, bool kSigned, size_t kG>
SLM_VNNI_TARGET void Q4PanelTile(const int8_t* xt, const uint8_t* w, size_t K, size_t ldw, size_t G,
                                 const float* scales, const float* offsets, const int32_t* qstart,
                                 const int32_t* gs, PanelRows rows, const float* bias, float* out,
                                 Prefetch pf) {
  if constexpr (kG > 0) G = kG;
  const size_t groups = K / G, steps = G / 4;
  const bool symmetric = offsets == nullptr;
  __m512 f[kM], h[kM];
  #pragma GCC unroll 16
  for (size_t m = 0; m < kM; ++m) f[m] = h[m] = _mm512_setzero_ps();
  for (size_t g = 0; g < groups; ++g) {
    __m512i a[kM], b[kM];
    // Start values: signed, qstart (+ 8·gs when asymmetric); unsigned, −8·gs when symmetric, else
    // 0. e0 / e1: the part from the activations, the same for every weight row.
    __m512i e0 = _mm512_setzero_si512(), e1 = _mm512_setzero_si512();
    if (kSigned != symmetric) {
      e0 = _mm512_slli_epi32(_mm512_loadu_si512(gs + g * kP), 3);
      e1 = _mm512_slli_epi32(_mm512_loadu_si512(gs + g * kP + 16), 3);
      if (!kSigned) {
        e0 = _mm512_sub_epi32(_mm512_setzero_si512(), e0);
        e1 = _mm512_sub_epi32(_mm512_setzero_si512(), e1);
      }
    }
    #pragma GCC unroll 16
    for (size_t m = 0; m < kM; ++m) {
      if constexpr (kSigned) {
        const __m512i start = _mm512_set1_epi32(qstart[m * groups + g]);
        a[m] = _mm512_add_epi32(start, e0);
        b[m] = _mm512_add_epi32(start, e1);
      } else {
        a[m] = e0;
        b[m] = e1;
      }
    }
    pf.Lines(g * steps, (g + 1) * steps);
    if constexpr (kG > 0) {
      #pragma GCC unroll 32
      for (size_t q = 0; q < kG / 4; ++q) PanelStep<kM, kSigned>(xt, w, ldw, g * (kG / 4) + q, a, b);
    } else {
      for (size_t q = g * steps; q < (g + 1) * steps; ++q) PanelStep<kM, kSigned>(xt, w, ldw, q, a, b);
    }
    #pragma GCC unroll 16
    for (size_t m = 0; m < kM; ++m) {
      const __m512 vs = _mm512_set1_ps(scales[m * groups + g]);
      f[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[m]), vs, f[m]);
      h[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(b[m]), vs, h[m]);
    }
    if (!symmetric) {
      const __m512 gf0 = _mm512_cvtepi32_ps(_mm512_loadu_si512(gs + g * kP));
      const __m512 gf1 = _mm512_cvtepi32_ps(_mm512_loadu_si512(gs + g * kP + 16));
      #pragma GCC unroll 16
      for (size_t m = 0; m < kM; ++m) {
        const __m512 vo = _mm512_set1_ps(offsets[m * groups + g]);
        f[m] = _mm512_fmadd_ps(gf0, vo, f[m]);
        h[m] = _mm512_fmadd_ps(gf1, vo, h[m]);
      }
    }
  }
  const __m512 xs0 = _mm512_loadu_ps(rows.xscale), xs1 = _mm512_loadu_ps(rows.xscale + 16);
  #pragma GCC unroll 16
  for (size_t m = 0; m < kM; ++m) {
    const __m512 bm = _mm512_set1_ps(bias ? bias[m] : 0.0f);
    _mm512_storeu_ps(out + m * kP, _mm512_fmadd_ps(f[m], xs0, bm));
    _mm512_storeu_ps(out + m * kP + 16, _mm512_fmadd_ps(h[m], xs1, bm));
  }
}

// The signed form's unpack (dst[K] = q − 8 as signed bytes, in k order) fused with the row's
// corrections, qstart[g] = −128 · Σ_{k∈g} (q[k] − 8) (see Q4PanelTile). 128 k per step: the 64
// packed bytes are four 32-k blocks of 16 bytes (low nibbles k 32b..32b+15, high nibbles
// k 32b+16..32b+31); one two-source permute per 64 output bytes puts them in k order. For the
// corrections, one vpsadbw of lo + hi sums 16 nibbles per 64-bit lane (2 lanes per block). A
// K % 128 == 64 tail goes through the unsigned 64-k unpack and scalar sums.
SLM_VNNI_TARGET void UnpackQ4RowSigned(const uint8_t* src, size_t K, size_t G, uint8_t* dst, int32_t* qstart) {
  const __m512i mask = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  // Σ q per 16 codes first (one store per 128 k), then whole groups: no division per lane (a
  // divide per 64-bit lane cost as much as the panel's GEMM).
  thread_local std::vector<int32_t> half_block_sums;
  half_block_sums.resize(K / 16);
  int32_t* hb = half_block_sums.data();
  size_t k = 0;
  for (; k + 128 <= K; k += 128) {
    const __m512i v = _mm512_loadu_si512(src + k / 2);
    const __m512i lo = _mm512_and_si512(v, mask), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
    _mm512_storeu_si512(dst + k, _mm512_sub_epi8(_mm512_permutex2var_epi64(lo, first, hi), eight));
    _mm512_storeu_si512(dst + k + 64, _mm512_sub_epi8(_mm512_permutex2var_epi64(lo, second, hi), eight));
    // 64-bit lane l: the 16 nibbles of bytes 8l..8l+7 (half of block l / 2).
    const __m512i sums = _mm512_sad_epu8(_mm512_add_epi8(lo, hi), _mm512_setzero_si512());
    if (G == 32) {  // the step's 4 groups at once: lanes 2b + 2b+1 are block b
      const __m512i blocks = _mm512_add_epi64(sums, _mm512_bsrli_epi128(sums, 8));  // block b in lane 2b
      const __m512i even = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 0, 2, 4, 6), blocks);
      const __m128i q = _mm256_castsi256_si128(_mm512_cvtepi64_epi32(even));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qstart + k / 32),
                       _mm_slli_epi32(_mm_sub_epi32(_mm_set1_epi32(8 * 32), q), 7));
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(hb + k / 16), _mm512_cvtepi64_epi32(sums));
    }
  }
  const size_t whole = k;  // k below `whole`: G = 32 groups already in qstart
  if (k < K) {  // the last 64 k: two 32-k blocks of 16 bytes
    vnni::UnpackQ4Row<true>(src + k / 2, dst + k, K - k);
    for (; k < K; k += 16) {
      int32_t codes = 0;
      for (size_t i = 0; i < 8; ++i) codes += (src[k / 2 + i] & 0x0F) + (src[k / 2 + i] >> 4);
      hb[k / 16] = codes;
    }
  }
  // The remaining groups from the half-block sums (for G = 32 only the tail's: a loop over a
  // run-time count of 2 half blocks per group, reading back the sums just stored, had been a
  // third of this function's time, `perf annotate` of 1B 8da4w prefill).
  const size_t per_group = G / 16;
  for (size_t g = G == 32 ? whole / G : 0; g < K / G; ++g) {
    int32_t sum = -8 * int32_t(G);
    for (size_t j = 0; j < per_group; ++j) sum += hb[g * per_group + j];
    qstart[g] = -128 * sum;
  }
}

// Columns [n, n + kB·kM) for all R rows: kB blocks of kM weight rows unpacked together, and per
// panel their kB tiles back to back (see vnni::kQ4WalkRows); the last panel's tile b prefetches
// block b of the next walk.
template <size_t kM, size_t kB, bool kSigned, size_t kG>
SLM_VNNI_TARGET void Q4PanelBlock(const Q4PanelArgs& s, size_t n) {
  const size_t groups = s.K / s.G, ldw = SlabStride(s.K), row_bytes = s.K / 2;
  for (size_t c = 0; c < kB * kM; ++c) {
    const uint8_t* row = s.w + (n + c) * row_bytes;
    if constexpr (kSigned) {
      UnpackQ4RowSigned(row, s.K, s.G, s.slab + c * ldw, s.qstart + c * groups);
    } else {
      vnni::UnpackQ4Row<false>(row, s.slab + c * ldw, s.K);
    }
  }
  const size_t panels = (s.R + kP - 1) / kP;
  const NextBlocks next{s.w + (n + kB * kM) * row_bytes, (s.N - n - kB * kM) * row_bytes, kM * row_bytes};
  for (size_t p = 0; p < panels; ++p) {
    for (size_t b = 0; b < kB; ++b) {
      const size_t nb = n + b * kM;
      Q4PanelTile<kM, kSigned, kG>(s.xt + p * kP * s.K, s.slab + b * kM * ldw, s.K, ldw, s.G,
                                   s.scales + nb * groups, s.offsets ? s.offsets + nb * groups : nullptr,
                                   s.qstart + b * kM * groups, s.gs + p * groups * kP,
                                   PanelRows{nullptr, s.xscale + p * kP}, s.bias ? s.bias + nb : nullptr, s.out,
                                   p + 1 == panels ? next.Part(b) : Prefetch{});
      WriteRows<kP, kM>(s.out, p, s.R, s.N, nb, s.y);
    }
  }
}

// Columns [n, end) in walks of kQ4WalkRows, then blocks of kQ4M, 2 and 1 weight rows.
template <bool kSigned, size_t kG>
SLM_VNNI_TARGET void Q4PanelBlocks(const Q4PanelArgs& s, size_t n, size_t end) {
  constexpr size_t kB = kQ4WalkRows / kQ4M;
  for (; n + kB * kQ4M <= end; n += kB * kQ4M) Q4PanelBlock<kQ4M, kB, kSigned, kG>(s, n);
  for (; n + kQ4M <= end; n += kQ4M) Q4PanelBlock<kQ4M, 1, kSigned, kG>(s, n);
  for (; n + 2 <= end; n += 2) Q4PanelBlock<2, 1, kSigned, kG>(s, n);
  for (; n < end; ++n) Q4PanelBlock<1, 1, kSigned, kG>(s, n);
}

template <bool kSigned>
SLM_VNNI_TARGET void Q4PanelBlocks(const Q4PanelArgs& s, size_t n, size_t end) {
  switch (s.G) {
    case 32: return Q4PanelBlocks<kSigned, 32>(s, n, end);
    case 64: return Q4PanelBlocks<kSigned, 64>(s, n, end);
    case 128: return Q4PanelBlocks<kSigned, 128>(s, n, end);
    default: return Q4PanelBlocks<kSigned, 0>(s, n, end);
  }
}

}  // namespace

void MatMulQ8DynPanelVnni(const int8_t* xq, const float* xscale, const int32_t* xsum,
                          const int8_t* w, const float* scales, const float* bias, float* y,
                          int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  const size_t rows = size_t(R), k = size_t(K), panels = (rows + kP - 1) / kP;
  const size_t xt_bytes = Align64(panels * kP * k), slab_bytes = Align64(kQ8M * SlabStride(k));
  const size_t out_bytes = Align64(kQ8M * kP * sizeof(float)), row_bytes = panels * kP * sizeof(float);
  uint8_t* scratch = PanelScratch(xt_bytes + slab_bytes + out_bytes + 2 * row_bytes);
  Q8PanelArgs s{};
  s.xt = reinterpret_cast<int8_t*>(scratch);
  s.slab = scratch + xt_bytes;
  s.out = reinterpret_cast<float*>(scratch + xt_bytes + slab_bytes);
  int32_t* xsum_pad = reinterpret_cast<int32_t*>(scratch + xt_bytes + slab_bytes + out_bytes);
  float* xscale_pad = reinterpret_cast<float*>(scratch + xt_bytes + slab_bytes + out_bytes + row_bytes);
  TransposeQuads(xq, rows, k, 0, reinterpret_cast<int8_t*>(scratch));
  PadToPanels(xsum, rows, panels * kP, xsum_pad);
  PadToPanels(xscale, rows, panels * kP, xscale_pad);
  s.xsum = xsum_pad;
  s.xscale = xscale_pad;
  s.w = w;
  s.scales = scales;
  s.bias = bias;
  s.y = y;
  s.R = rows;
  s.K = k;
  s.N = size_t(N);
  size_t n = size_t(n_begin);
  const size_t end = size_t(n_end);
  for (; n + kQ8M <= end; n += kQ8M) Q8PanelBlock<kQ8M>(s, n);
  for (; n + 4 <= end; n += 4) Q8PanelBlock<4>(s, n);
  for (; n < end; ++n) Q8PanelBlock<1>(s, n);
}

void MatMulQ4DynPanelVnni(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                          const uint8_t* w, const float* scales, const float* offsets,
                          const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                          int64_t n_begin, int64_t n_end) {
  const size_t rows = size_t(R), k = size_t(K), panels = (rows + kP - 1) / kP;
  const size_t groups = k / size_t(G);
  const size_t xt_bytes = Align64(panels * kP * k), slab_bytes = Align64(kQ4WalkRows * SlabStride(k));
  const size_t out_bytes = Align64(kQ4M * kP * sizeof(float)), row_bytes = panels * kP * sizeof(float);
  const size_t gs_bytes = Align64(panels * groups * kP * sizeof(int32_t));
  uint8_t* scratch = PanelScratch(xt_bytes + slab_bytes + out_bytes + row_bytes + gs_bytes + kQ4WalkRows * groups * sizeof(int32_t));
  Q4PanelArgs s{};
  s.xt = reinterpret_cast<int8_t*>(scratch);
  s.slab = scratch + xt_bytes;
  s.out = reinterpret_cast<float*>(scratch + xt_bytes + slab_bytes);
  float* xscale_pad = reinterpret_cast<float*>(scratch + xt_bytes + slab_bytes + out_bytes);
  PadToPanels(xscale, rows, panels * kP, xscale_pad);
  int32_t* gs = reinterpret_cast<int32_t*>(scratch + xt_bytes + slab_bytes + out_bytes + row_bytes);
  s.qstart = reinterpret_cast<int32_t*>(scratch + xt_bytes + slab_bytes + out_bytes + row_bytes + gs_bytes);
  // The signed form from two panels on (see Q4PanelTile); symmetric signed tiles need no sums.
  const bool signed_form = panels >= 2;
  TransposeQuads(xq, rows, k, signed_form ? 0x80 : 0, reinterpret_cast<int8_t*>(scratch));
  if (!signed_form || offsets != nullptr) GroupSumsToPanels<kP>(group_sums, rows, groups, gs);
  s.gs = gs;
  s.xscale = xscale_pad;
  s.w = w;
  s.scales = scales;
  s.offsets = offsets;
  s.bias = bias;
  s.y = y;
  s.R = rows;
  s.K = k;
  s.N = size_t(N);
  s.G = size_t(G);
  if (signed_form) {
    Q4PanelBlocks<true>(s, size_t(n_begin), size_t(n_end));
  } else {
    Q4PanelBlocks<false>(s, size_t(n_begin), size_t(n_end));
  }
}

#endif  // SLM_HAVE_VNNI_KERNELS

}  // namespace slm::kernels
