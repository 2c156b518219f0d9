// AVX-VNNI panel GEMMs for prefill-shaped dynamic-activation products (R >= kAvxVnniPanelRows):
// the 256-bit counterparts of matmul_q_vnni_panel.cc, for CPUs with AVX-VNNI and no AVX-512.
//
// As there, the activations are transposed once per call into panels — here of 16 rows (two
// vectors of 8 int32 lanes), xt[panel][k/4][16][4] — and a block of kM weight rows is unpacked
// once into bytes (Q8: w + 128; Q4: the codes q in k order); one step of 4 k broadcasts 4 weight
// bytes per weight row and issues 2 vpdpbusd against the two panel vectors: no reductions, the
// unpacking paid once per block for all R rows. Against the Highway int16 panel this replaces, per
// 4 k, weight row and 16 rows: one broadcast and 2 vpdpbusd instead of 2 broadcasts, 4 vpmaddwd
// and 4 vpaddd.
//  - Q8: Σ (w + 128)·x − 128·Σx per row, exact; outputs float(dot)·x_scale·w_scale + bias,
//    unfused, as the decode bodies (matmul_q_avxvnni.cc) and the Highway ones form them.
//  - Q4: unsigned codes against signed x; per group the exact dot (minus 8·Σx of the group when
//    symmetric) folded into f32 in group order, + offset·Σx when asymmetric, then
//    fma(acc, x_scale, bias or 0): the 8da4w order of quant_kernels.h; −8·Σx is the int32
//    accumulators' start value, one vector shared by the tile's weight rows. (The AVX-512
//    panel's signed form is not used here. On AVX-512, forcing the unsigned form made the 1B
//    8da4w prefill 0.92–0.97×; ported to this panel (nineteenth session, not kept) the signed
//    form made it slower: `--simd-target AVX2 bench -p 128`, 3 alternated rounds, 270–276 →
//    247–262 tok/s, `Q4Dyn…/R:32/…/body:2` 850–865 → 983–1017 µs.)
// The f32 accumulators of a Q4 tile live in its output buffer: 16 ymm registers hold the 12 int32
// accumulators of 6 weight rows, two panel vectors and a broadcast, and the fold touches them
// once per group.
#include <algorithm>
#include <cstring>

#include "kernels/matmul_q_vnni.h"
#include "kernels/vnni_intrinsics.h"
#include "kernels/vnni_panels.h"

namespace slm::kernels {

#if SLM_HAVE_VNNI_KERNELS

namespace {

using vnni::Align64;
using vnni::GroupSumsToPanels;
using vnni::NextBlocks;
using vnni::PadToPanels;
using vnni::PanelScratch;
using vnni::Prefetch;
using vnni::Q4PanelArgs;
using vnni::Q8PanelArgs;
using vnni::SlabStride;
using vnni::UnpackQ4Row;
using vnni::WriteRows;
using vnni::kQ4WalkRows;

constexpr size_t kP = 16;  // rows per panel: 2 vectors of 8 int32 lanes
constexpr size_t kM = 6;   // weight rows per tile: 12 accumulators + 2 x + 1 broadcast

// In place: r[j] lane i becomes r[i] lane j (an 8×8 transpose of 32-bit elements).
SLM_AVXVNNI_TARGET inline void Transpose8x8(__m256i (&r)[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int g = 0; g < 2; ++g) {  // u[4g + e]: 128-bit half h holds column 4h + e of rows 4g..4g+3
    u[4 * g + 0] = _mm256_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm256_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm256_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm256_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int e = 0; e < 4; ++e) {
    r[e] = _mm256_permute2x128_si256(u[e], u[4 + e], 0x20);
    r[4 + e] = _mm256_permute2x128_si256(u[e], u[4 + e], 0x31);
  }
}

// xt[p][q][j] (4 bytes) = xq[p·16 + j, 4q .. 4q + 3], rows >= R as 0. K % 32 == 0: blocks of 8
// rows × 8 quads are transposed in registers.
SLM_AVXVNNI_TARGET void TransposeQuads(const int8_t* xq, size_t R, size_t K, int8_t* xt) {
  const size_t panels = (R + kP - 1) / kP;
  for (size_t p = 0; p < panels; ++p) {
    int8_t* dst = xt + p * K * kP;
    for (size_t half = 0; half < kP / 8; ++half) {
      const size_t row0 = p * kP + half * 8;
      for (size_t k = 0; k < K; k += 32) {
        __m256i r[8];
        for (size_t i = 0; i < 8; ++i) {
          r[i] = row0 + i < R ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + (row0 + i) * K + k))
                              : _mm256_setzero_si256();
        }
        Transpose8x8(r);
        for (size_t c = 0; c < 8; ++c) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + ((k / 4 + c) * kP + half * 8) * 4), r[c]);
        }
      }
    }
  }
}

// a[m] += w[m, 4q..4q+3] · xt[q][0..8) (w: kRows unsigned rows, ldw bytes apart, xt signed),
// b[m] the same for lanes 8..16: one 4-k step.
template <size_t kRows>
SLM_AVXVNNI_TARGET inline void PanelStep(const int8_t* xt, const uint8_t* w, size_t ldw, size_t q, __m256i* a,
                                         __m256i* b) {
  const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + q * kP * 4));
  const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + q * kP * 4 + 32));
  #pragma GCC unroll 8
  for (size_t m = 0; m < kRows; ++m) {
    int32_t quad;
    std::memcpy(&quad, w + m * ldw + 4 * q, 4);
    const __m256i wb = _mm256_set1_epi32(quad);
    a[m] = vnni::Dpbusd256(a[m], wb, x0);
    b[m] = vnni::Dpbusd256(b[m], wb, x1);
  }
}

// The steps [q0, q1), one line of the next block prefetched per step (see vnni::Prefetch).
template <size_t kRows>
SLM_AVXVNNI_TARGET inline void PanelSteps(const int8_t* xt, const uint8_t* w, size_t ldw, size_t q0, size_t q1,
                                          __m256i* a, __m256i* b, Prefetch pf) {
  for (size_t q = q0; q < q1; ++q) {
    pf.Lines(q, q + 1);
    PanelStep<kRows>(xt, w, ldw, q, a, b);
  }
}

// ---- Q8 ----

// out[m][j] = float(Σ_k (w[m, k] + 128)·x[j, k] − 128·Σx[j]) · xscale[j] · scale[m] + bias[m].
template <size_t kRows>
SLM_AVXVNNI_TARGET void Q8PanelTile(const Q8PanelArgs& s, size_t p, size_t n, Prefetch pf) {
  __m256i a[kRows], b[kRows];
  #pragma GCC unroll 8
  for (size_t m = 0; m < kRows; ++m) a[m] = b[m] = _mm256_setzero_si256();
  PanelSteps<kRows>(s.xt + p * kP * s.K, s.slab, SlabStride(s.K), 0, s.K / 4, a, b, pf);
  const int32_t* xsum = s.xsum + p * kP;
  const float* xscale = s.xscale + p * kP;
  const __m256i c0 = _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xsum)), 7);
  const __m256i c1 = _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xsum + 8)), 7);
  const __m256 xs0 = _mm256_loadu_ps(xscale), xs1 = _mm256_loadu_ps(xscale + 8);
  #pragma GCC unroll 8
  for (size_t m = 0; m < kRows; ++m) {
    const __m256 sc = _mm256_set1_ps(s.scales[n + m]);
    __m256 v0 = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(a[m], c0)), xs0), sc);
    __m256 v1 = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(b[m], c1)), xs1), sc);
    if (s.bias != nullptr) {
      __asm__("" : "+x"(v0), "+x"(v1));  // no FMA contraction: the decode bodies add unfused
      const __m256 bm = _mm256_set1_ps(s.bias[n + m]);
      v0 = _mm256_add_ps(v0, bm);
      v1 = _mm256_add_ps(v1, bm);
    }
    _mm256_storeu_ps(s.out + m * kP, v0);
    _mm256_storeu_ps(s.out + m * kP + 8, v1);
  }
}

// Columns [n, n + kRows) for all R rows.
template <size_t kRows>
SLM_AVXVNNI_TARGET void Q8PanelBlock(const Q8PanelArgs& s, size_t n) {
  const __m256i flip = _mm256_set1_epi8(int8_t(0x80));
  for (size_t c = 0; c < kRows; ++c) {
    const int8_t* src = s.w + (n + c) * s.K;
    for (size_t k = 0; k < s.K; k += 32) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.slab + c * SlabStride(s.K) + k),
                          _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k)), flip));
    }
  }
  const size_t left = (s.N - n - kRows) * s.K, panels = (s.R + kP - 1) / kP;
  const Prefetch next{reinterpret_cast<const uint8_t*>(s.w + (n + kRows) * s.K), std::min(left, kRows * s.K)};
  for (size_t p = 0; p < panels; ++p) {
    Q8PanelTile<kRows>(s, p, n, p + 1 == panels ? next : Prefetch{});
    WriteRows<kP, kRows>(s.out, p, s.R, s.N, n, s.y);
  }
}

// ---- Q4 ----

// As the AVX-512 tile (matmul_q_vnni_panel.cc): the symmetric groups' −8·gs is the int32
// accumulators' start value, and kG > 0 (G = 32, 64, 128) unrolls a group's steps, the next
// block's lines prefetched once per group.
template <size_t kRows, bool kAsym, size_t kG>
SLM_AVXVNNI_TARGET void Q4PanelTile(const Q4PanelArgs& s, const uint8_t* slab, size_t p, size_t n, Prefetch pf) {
  const size_t G = kG > 0 ? kG : s.G, groups = s.K / G, steps = G / 4;
  const float* scales = s.scales + n * groups;
  const float* offsets = kAsym ? s.offsets + n * groups : nullptr;
  const int8_t* xt = s.xt + p * kP * s.K;
  float* f = s.out;  // f[m·16 + j]
  std::fill(f, f + kRows * kP, 0.0f);
  for (size_t g = 0; g < groups; ++g) {
    const int32_t* gs = s.gs + (p * groups + g) * kP;
    const __m256i gs0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gs));
    const __m256i gs1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gs + 8));
    __m256i a[kRows], b[kRows];
    const __m256i start0 = kAsym ? _mm256_setzero_si256() : _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(gs0, 3));
    const __m256i start1 = kAsym ? _mm256_setzero_si256() : _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(gs1, 3));
    #pragma GCC unroll 8
    for (size_t m = 0; m < kRows; ++m) {
      a[m] = start0;
      b[m] = start1;
    }
    pf.Lines(g * steps, (g + 1) * steps);
    if constexpr (kG > 0) {
      #pragma GCC unroll 32
      for (size_t q = 0; q < kG / 4; ++q) PanelStep<kRows>(xt, slab, SlabStride(s.K), g * (kG / 4) + q, a, b);
    } else {
      for (size_t q = g * steps; q < (g + 1) * steps; ++q) PanelStep<kRows>(xt, slab, SlabStride(s.K), q, a, b);
    }
    #pragma GCC unroll 8
    for (size_t m = 0; m < kRows; ++m) {
      const __m256 vs = _mm256_set1_ps(scales[m * groups + g]);
      __m256 f0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[m]), vs, _mm256_loadu_ps(f + m * kP));
      __m256 f1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(b[m]), vs, _mm256_loadu_ps(f + m * kP + 8));
      if constexpr (kAsym) {
        const __m256 vo = _mm256_set1_ps(offsets[m * groups + g]);
        f0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(gs0), vo, f0);
        f1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(gs1), vo, f1);
      }
      _mm256_storeu_ps(f + m * kP, f0);
      _mm256_storeu_ps(f + m * kP + 8, f1);
    }
  }
  const float* xscale = s.xscale + p * kP;
  const __m256 xs0 = _mm256_loadu_ps(xscale), xs1 = _mm256_loadu_ps(xscale + 8);
  #pragma GCC unroll 8
  for (size_t m = 0; m < kRows; ++m) {
    const __m256 bm = _mm256_set1_ps(s.bias ? s.bias[n + m] : 0.0f);
    _mm256_storeu_ps(f + m * kP, _mm256_fmadd_ps(_mm256_loadu_ps(f + m * kP), xs0, bm));
    _mm256_storeu_ps(f + m * kP + 8, _mm256_fmadd_ps(_mm256_loadu_ps(f + m * kP + 8), xs1, bm));
  }
}

// Columns [n, n + kB·kRows) for all R rows: kB blocks unpacked together, their tiles back to back
// per panel (vnni::kQ4WalkRows; here 1B 8da4w prefill of 512 tokens 189–232 → 241–252 tok/s).
template <size_t kRows, size_t kB, bool kAsym, size_t kG>
SLM_AVXVNNI_TARGET void Q4PanelBlock(const Q4PanelArgs& s, size_t n) {
  const size_t ldw = SlabStride(s.K), row_bytes = s.K / 2;
  for (size_t c = 0; c < kB * kRows; ++c) UnpackQ4Row<false>(s.w + (n + c) * row_bytes, s.slab + c * ldw, s.K);
  const size_t panels = (s.R + kP - 1) / kP;
  const NextBlocks next{s.w + (n + kB * kRows) * row_bytes, (s.N - n - kB * kRows) * row_bytes, kRows * row_bytes};
  for (size_t p = 0; p < panels; ++p) {
    for (size_t b = 0; b < kB; ++b) {
      const size_t nb = n + b * kRows;
      Q4PanelTile<kRows, kAsym, kG>(s, s.slab + b * kRows * ldw, p, nb, p + 1 == panels ? next.Part(b) : Prefetch{});
      WriteRows<kP, kRows>(s.out, p, s.R, s.N, nb, s.y);
    }
  }
}

// Columns [n, end) in walks of kQ4WalkRows, then blocks of kM, 2 and 1 weight rows.
template <bool kAsym, size_t kG>
SLM_AVXVNNI_TARGET void Q4PanelBlocks(const Q4PanelArgs& s, size_t n, size_t end) {
  constexpr size_t kB = kQ4WalkRows / kM;
  for (; n + kB * kM <= end; n += kB * kM) Q4PanelBlock<kM, kB, kAsym, kG>(s, n);
  for (; n + kM <= end; n += kM) Q4PanelBlock<kM, 1, kAsym, kG>(s, n);
  for (; n + 2 <= end; n += 2) Q4PanelBlock<2, 1, kAsym, kG>(s, n);
  for (; n < end; ++n) Q4PanelBlock<1, 1, kAsym, kG>(s, n);
}

template <bool kAsym>
SLM_AVXVNNI_TARGET void Q4PanelBlocks(const Q4PanelArgs& s, size_t n, size_t end) {
  switch (s.G) {
    case 32: return Q4PanelBlocks<kAsym, 32>(s, n, end);
    case 64: return Q4PanelBlocks<kAsym, 64>(s, n, end);
    case 128: return Q4PanelBlocks<kAsym, 128>(s, n, end);
    default: return Q4PanelBlocks<kAsym, 0>(s, n, end);
  }
}

}  // namespace

void MatMulQ8DynPanelAvxVnni(const int8_t* xq, const float* xscale, const int32_t* xsum,
                             const int8_t* w, const float* scales, const float* bias, float* y,
                             int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  const size_t rows = size_t(R), k = size_t(K), panels = (rows + kP - 1) / kP;
  const size_t xt_bytes = Align64(panels * kP * k), slab_bytes = Align64(kM * SlabStride(k));
  const size_t out_bytes = Align64(kM * kP * sizeof(float)), row_bytes = Align64(panels * kP * sizeof(float));
  uint8_t* scratch = PanelScratch(xt_bytes + slab_bytes + out_bytes + 2 * row_bytes);
  int32_t* xsum_pad = reinterpret_cast<int32_t*>(scratch + xt_bytes + slab_bytes + out_bytes);
  float* xscale_pad = reinterpret_cast<float*>(scratch + xt_bytes + slab_bytes + out_bytes + row_bytes);
  TransposeQuads(xq, rows, k, reinterpret_cast<int8_t*>(scratch));
  PadToPanels(xsum, rows, panels * kP, xsum_pad);
  PadToPanels(xscale, rows, panels * kP, xscale_pad);
  const Q8PanelArgs s{reinterpret_cast<int8_t*>(scratch), xsum_pad, xscale_pad, w, scales, bias, y, rows, k, size_t(N),
                      scratch + xt_bytes, reinterpret_cast<float*>(scratch + xt_bytes + slab_bytes)};
  size_t n = size_t(n_begin);
  const size_t end = size_t(n_end);
  for (; n + kM <= end; n += kM) Q8PanelBlock<kM>(s, n);
  for (; n + 2 <= end; n += 2) Q8PanelBlock<2>(s, n);
  for (; n < end; ++n) Q8PanelBlock<1>(s, n);
}

void MatMulQ4DynPanelAvxVnni(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                             const uint8_t* w, const float* scales, const float* offsets,
                             const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                             int64_t n_begin, int64_t n_end) {
  const size_t rows = size_t(R), k = size_t(K), panels = (rows + kP - 1) / kP;
  const size_t groups = k / size_t(G);
  const size_t xt_bytes = Align64(panels * kP * k), slab_bytes = Align64(kQ4WalkRows * SlabStride(k));
  const size_t out_bytes = Align64(kM * kP * sizeof(float)), row_bytes = Align64(panels * kP * sizeof(float));
  const size_t gs_bytes = Align64(panels * groups * kP * sizeof(int32_t));
  uint8_t* scratch = PanelScratch(xt_bytes + slab_bytes + out_bytes + row_bytes + gs_bytes);
  float* xscale_pad = reinterpret_cast<float*>(scratch + xt_bytes + slab_bytes + out_bytes);
  int32_t* gs = reinterpret_cast<int32_t*>(scratch + xt_bytes + slab_bytes + out_bytes + row_bytes);
  TransposeQuads(xq, rows, k, reinterpret_cast<int8_t*>(scratch));
  PadToPanels(xscale, rows, panels * kP, xscale_pad);
  GroupSumsToPanels<kP>(group_sums, rows, groups, gs);
  const Q4PanelArgs s{reinterpret_cast<int8_t*>(scratch), gs, xscale_pad, w, scales, offsets, bias, y, rows, k, size_t(N),
                      size_t(G), scratch + xt_bytes, /*qstart=*/nullptr, reinterpret_cast<float*>(scratch + xt_bytes + slab_bytes)};
  if (offsets != nullptr) {
    Q4PanelBlocks<true>(s, size_t(n_begin), size_t(n_end));
  } else {
    Q4PanelBlocks<false>(s, size_t(n_begin), size_t(n_end));
  }
}

#endif  // SLM_HAVE_VNNI_KERNELS

}  // namespace slm::kernels
