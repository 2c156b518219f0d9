// AVX-VNNI bodies of the dynamic-activation quantized products (8da8w, 8da4w): the 256-bit,
// VEX-encoded vpdpbusd of CPUs that have it without AVX-512 (Intel Alder Lake and later client
// cores; AMD Zen 4/5 have it too but take the AVX-512 VNNI bodies). The dispatch takes them when
// the CPU has AVX-VNNI and AVX-512 VNNI is not in use (where it is, shapes it rejects go to
// Highway, so prefill and decode stay in one family): the decode tiles below for R <
// kAvxVnniMaxRows rows of x, the panel GEMMs of matmul_q_avxvnni_panel.cc from kAvxVnniPanelRows;
// the rows in between stay on the Highway tiles. Every one of these bodies forms its outputs in
// the order of quant_kernels.h, as the Highway ones do, so all give the same bits (tested bit for
// bit).
//
// Why: without an int8 dot instruction the Highway AVX2 bodies widen both operands to int16 and
// use vpmaddwd: per 32 products two widenings, two multiply-adds and two adds; vpdpbusd does 32
// u8×s8 products summed into 8 int32 lanes in one instruction. Written with intrinsics in a
// function-level target for the reason given in matmul_q_vnni.cc (no such op in Highway 1.0.3).
//
// The decode tiles follow the AVX-512 VNNI tiles of matmul_q_vnni.cc at half the width:
//  - Q8: w + 128 (unsigned) times xq (signed), minus 128·Σxq per row; exact; the output
//    float(dot)·x_scale·w_scale + bias, unfused, as the Highway bodies form it.
//  - Q4: the nibbles (0..15) unsigned, xq signed. A 32-byte load is 64 k: two 32-k blocks, block
//    b's byte j = q[32b + j] | q[32b + 16 + j] << 4. int32 lane i covers bytes 4i..4i+3 of block
//    i/4, whose low nibbles are q[32b + 4(i%4) + 0..3] and high nibbles q[32b + 16 + 4(i%4) + 0..3];
//    so xq is permuted per 64 k into its "low" bytes (k 0-15, 32-47) then its "high" bytes
//    (16-31, 48-63), and one vpdpbusd of the low nibbles plus one of the high nibbles put 8
//    products of one block into each lane. The lanes are reduced to per-block sums for 4 outputs
//    at once, combined into group dots and folded in group order (the 8da4w order of
//    quant_kernels.h: acc = fma(float(dot_g), scale_g, acc), dot_g of q − 8 for symmetric groups,
//    + fma(float(Σ_g xq), offset_g) for asymmetric ones; y = fma(acc, x_scale, bias or 0)).
#include <type_traits>

#include "kernels/cpu_feature.h"
#include "kernels/decode_prefetch.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/q4_dyn_folds256.h"
#include "kernels/vnni_intrinsics.h"

#if SLM_HAVE_VNNI_KERNELS
#include <cpuid.h>
#endif

namespace slm::kernels {

namespace {
bool CpuHasAvxVnni() {
#if SLM_HAVE_VNNI_KERNELS
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
  // GCC 12's __builtin_cpu_supports does not know "avxvnni": CPUID leaf 7, subleaf 1, EAX bit 4.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax >> 4 & 1) != 0;
#else
  return false;
#endif
}
CpuFeature avx_vnni(CpuHasAvxVnni, "SLM_DISABLE_VNNI", "SLM_DISABLE_AVX_VNNI");
}  // namespace

bool AvxVnniAvailable() { return avx_vnni.Available(); }
void SetAvxVnniEnabledForTest(bool enabled) { avx_vnni.SetEnabledForTest(enabled); }

#if SLM_HAVE_VNNI_KERNELS

namespace {

using vnni::Dpbusd256;
using vnni::ReduceAdd256;
using vnni::ThreadScratch;

// ---- Q8 × dynamic int8 ----

// xsum[r] = Σ_k xq[r, k]: the correction for the weights' +128 bias.
SLM_AVXVNNI_TARGET void RowSums(const int8_t* xq, int32_t* xsum, size_t R, size_t K) {
  const __m256i ones = _mm256_set1_epi8(1);
  for (size_t r = 0; r < R; ++r) {
    __m256i acc = _mm256_setzero_si256();
    for (size_t k = 0; k < K; k += 32) {
      acc = Dpbusd256(acc, ones, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + r * K + k)));
    }
    xsum[r] = ReduceAdd256(acc);
  }
}

// One row of xq × kN weight rows; K % 32 == 0. Each weight row prefetches what the next tile (or,
// along long rows, its own row 1 KB on) will read (decode_prefetch.h). kN = 8 (1 at the edge):
// more rows are more memory streams at once, as for the AVX-512 decode tile (matmul_q_vnni.cc).
// This tile's code in a 1B-shaped walk on Zen 5 (2 threads, 16 rounds in rotated order;
// docs/benchmarks.md, thirtieth session): 8 rows 1.10–1.18× the bytes/s of 4 in 3 of 4 runs,
// 0.95× in one. Not measured on an Intel AVX-VNNI CPU.
template <int kN>
SLM_AVXVNNI_TARGET inline void Q8Tile(const int8_t* xq, float xscale, int32_t xsum, const int8_t* w,
                                      const float* scales, const float* bias, float* y, size_t K) {
  __m256i acc[kN];
  const __m256i flip = _mm256_set1_epi8(int8_t(0x80));
  #pragma GCC unroll 8
  for (int c = 0; c < kN; ++c) acc[c] = _mm256_setzero_si256();
  for (size_t k = 0; k < K; k += 32) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k));
    #pragma GCC unroll 8
    for (int c = 0; c < kN; ++c) {
      if (k % 64 == 0) PrefetchDecodeLine(DecodePrefetchAddress(w + c * K + k, k, K, kN));
      const __m256i wv = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c * K + k)), flip);
      acc[c] = Dpbusd256(acc[c], wv, xv);
    }
  }
  #pragma GCC unroll 8
  for (int c = 0; c < kN; ++c) {
    // float(dot) · x_scale · w_scale, then + bias, unfused: the Highway tiles and int16 panel,
    // which run the prefill products on these CPUs, form their outputs that way (Q8DynOutput).
    float v = float(ReduceAdd256(acc[c]) - 128 * xsum) * xscale * scales[c];
    __asm__("" : "+x"(v));  // keeps GCC from contracting the add below into an FMA
    y[c] = bias ? v + bias[c] : v;
  }
}

// ---- Q4 × dynamic int8 ----

// out = each row of xq [R, K] in the order of the Q4 tile's nibble loads: per 64 k, the 32 "low"
// bytes (k 0-15, 32-47) then the 32 "high" bytes (16-31, 48-63). K % 64 == 0.
SLM_AVXVNNI_TARGET void PermuteForQ4Steps(const int8_t* xq, int8_t* out, size_t R, size_t K) {
  for (size_t i = 0; i < R * K; i += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + i));       // pieces 0, 1
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + i + 32));  // pieces 2, 3
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 32), _mm256_permute2x128_si256(a, b, 0x31));
  }
}

// Per 128-bit half b of the four vectors: [Σ v0, Σ v1, Σ v2, Σ v3] over the half's 4 lanes.
SLM_AVXVNNI_TARGET inline __m256i BlockSums4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i a01 = _mm256_add_epi32(_mm256_unpacklo_epi32(v0, v1), _mm256_unpackhi_epi32(v0, v1));
  const __m256i a23 = _mm256_add_epi32(_mm256_unpacklo_epi32(v2, v3), _mm256_unpackhi_epi32(v2, v3));
  return _mm256_add_epi32(_mm256_unpacklo_epi64(a01, a23), _mm256_unpackhi_epi64(a01, a23));
}

using vnni::Q4Groups;

// One row of xq (permuted by PermuteForQ4Steps) × kN weight rows (8, 4 or 1); K % 64 == 0;
// group_sums: the row's [K / G] Σxq per group. The outputs form sets of 4 (lane j = weight row
// 4s + j; a single weight row is a set with lanes 1-3 zero): the two sets of 8 weight rows are
// two independent FMA chains. Each step's block sums are folded by vnni::Q4DynFolds256
// (q4_dyn_folds256.h, shared with the AVX2 tile of matmul_q4_dyn256-inl.h). Per 64-byte line of
// each weight row (two steps of 64 k) one prefetch of the next tile's line (kN rows on, as every
// decode tile) and, over the first lines, of the next tile's scales.
template <int kN, Q4Groups kG, bool kAsym>
SLM_AVXVNNI_TARGET inline void Q4Tile(const int8_t* xp, float xscale, const int32_t* group_sums,
                                      const uint8_t* w, const float* scales, const float* offsets,
                                      const float* bias, float* y, size_t K, size_t G) {
  static_assert(kN == 8 || kN == 4 || kN == 1, "8, 4 or 1 weight rows");
  constexpr int kSets = (kN + 3) / 4;
  constexpr int kSetCols = kN < 4 ? kN : 4;
  const size_t groups = K / G, row_bytes = K / 2, steps = K / 64, scale_lines = (groups + 15) / 16;
  vnni::Q4DynFolds256<kSets, kSetCols, kG, kAsym> folds(group_sums, scales, offsets, groups, 1, G);
  // One 64-k step: the dots of every weight row, per set reduced to block sums and folded.
  const auto step = [&](size_t t) SLM_AVXVNNI_TARGET __attribute__((always_inline)) {
    const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + 64 * t));
    const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + 64 * t + 32));
    folds.BeginStep(t);
    #pragma GCC unroll 2
    for (int s = 0; s < kSets; ++s) {
      __m256i dots[4];
      #pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        if (j >= kSetCols) {
          dots[j] = _mm256_setzero_si256();
          continue;
        }
        __m256i lo, hi;
        vnni::LoadNibbles256(w + (4 * s + j) * row_bytes + 32 * t, lo, hi);
        dots[j] = Dpbusd256(Dpbusd256(_mm256_setzero_si256(), lo, xl), hi, xh);
      }
      folds.Step(s, BlockSums4(dots[0], dots[1], dots[2], dots[3]));  // half b: block 2t + b
    }
  };
  size_t t = 0;
  for (size_t line = 0; t + 2 <= steps; t += 2, ++line) {
    #pragma GCC unroll 8
    for (int n = 0; n < kN; ++n) {
      PrefetchDecodeLine(w + (n + kN) * row_bytes + 32 * t);
      if (line < scale_lines) {
        PrefetchDecodeLine(scales + (n + kN) * groups + 16 * line);
        if constexpr (kAsym) PrefetchDecodeLine(offsets + (n + kN) * groups + 16 * line);
      }
    }
    step(t);
    step(t + 1);
  }
  if (t < steps) step(t);  // K % 128 == 64: the last half line
  folds.Store(xscale, bias, y);
}

// Tiles of 8, 4 and 1 weight rows over columns [n_begin, n_end) of one row of x.
template <Q4Groups kG, bool kAsym>
SLM_AVXVNNI_TARGET void Q4Row(const int8_t* xr, float xscale, const int32_t* gs, const uint8_t* w,
                              const float* scales, const float* offsets, const float* bias, float* yr,
                              size_t K, size_t G, size_t n_begin, size_t n_end) {
  const size_t groups = K / G, row_bytes = K / 2;
  size_t c = n_begin;
  const auto tile = [&](auto n) SLM_AVXVNNI_TARGET __attribute__((always_inline)) {
    Q4Tile<decltype(n)::value, kG, kAsym>(xr, xscale, gs, w + c * row_bytes, scales + c * groups,
                                          kAsym ? offsets + c * groups : nullptr, bias ? bias + c : nullptr, yr + c, K, G);
  };
  for (; c + 8 <= n_end; c += 8) tile(std::integral_constant<int, 8>{});
  for (; c + 4 <= n_end; c += 4) tile(std::integral_constant<int, 4>{});
  for (; c < n_end; ++c) tile(std::integral_constant<int, 1>{});
}

SLM_AVXVNNI_TARGET double AvxVnniDotLoopBody(int64_t iters, int32_t* sink) {
  __m256i acc[12];
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
  for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_epi32(j);
  for (int64_t i = 0; i < iters; ++i) {
    #pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = Dpbusd256(acc[j], a, b);
  }
  __m256i s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_epi32(s, acc[j]);
  *sink = ReduceAdd256(s);
  return double(iters) * 12 * 32 * 2;
}

}  // namespace

double AvxVnniDotLoop(int64_t iters, int32_t* sink) {
  if (!AvxVnniAvailable()) return 0;
  return AvxVnniDotLoopBody(iters, sink);
}

bool MatMulQ8DynColumnsAvxVnni(const int8_t* xq, const float* xscale, const int8_t* w,
                               const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                               int64_t N, int64_t n_begin, int64_t n_end) {
  const bool decode = R < kAvxVnniMaxRows, panel = R >= kAvxVnniPanelRows;
  if ((!decode && !panel) || K % 32 != 0 || !AvxVnniAvailable() || VnniAvailable()) return false;
  const size_t k = size_t(K);
  int32_t* xsum = reinterpret_cast<int32_t*>(ThreadScratch(size_t(R) * sizeof(int32_t)));
  RowSums(xq, xsum, size_t(R), k);
  if (panel) {
    MatMulQ8DynPanelAvxVnni(xq, xscale, xsum, w, scales, bias, y, R, K, N, n_begin, n_end);
    return true;
  }
  for (int64_t r = 0; r < R; ++r) {
    const int8_t* xr = xq + r * K;
    float* yr = y + r * N;
    int64_t c = n_begin;
    for (; c + 8 <= n_end; c += 8) {
      Q8Tile<8>(xr, xscale[r], xsum[r], w + c * K, scales + c, bias ? bias + c : nullptr, yr + c, k);
    }
    for (; c < n_end; ++c) Q8Tile<1>(xr, xscale[r], xsum[r], w + c * K, scales + c, bias ? bias + c : nullptr, yr + c, k);
  }
  return true;
}

bool MatMulQ4DynColumnsAvxVnni(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                               const uint8_t* w, const float* scales, const float* offsets,
                               const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                               int64_t n_begin, int64_t n_end) {
  const bool decode = R < kAvxVnniMaxRows, panel = R >= kAvxVnniPanelRows;
  if ((!decode && !panel) || K % 64 != 0 || G % 32 != 0 || !AvxVnniAvailable() || VnniAvailable()) return false;
  if (panel) {
    MatMulQ4DynPanelAvxVnni(xq, xscale, group_sums, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end);
    return true;
  }
  if (G != 32 && G % 64 != 0) return false;  // the tiles fold whole groups per 64-k step or steps per group
  const size_t k = size_t(K), g = size_t(G), groups = k / g;
  int8_t* xp = reinterpret_cast<int8_t*>(ThreadScratch(size_t(R) * k));
  PermuteForQ4Steps(xq, xp, size_t(R), k);
  for (int64_t r = 0; r < R; ++r) {
    const int8_t* xr = xp + r * K;
    const int32_t* gs = group_sums + r * int64_t(groups);
    float* yr = y + r * N;
    const auto run = [&](auto row) { row(xr, xscale[r], gs, w, scales, offsets, bias, yr, k, g, size_t(n_begin), size_t(n_end)); };
    const bool asym = offsets != nullptr;
    if (G == 32) run(asym ? Q4Row<Q4Groups::k32, true> : Q4Row<Q4Groups::k32, false>);
    else if (G == 64) run(asym ? Q4Row<Q4Groups::k64, true> : Q4Row<Q4Groups::k64, false>);
    else run(asym ? Q4Row<Q4Groups::kMulti, true> : Q4Row<Q4Groups::kMulti, false>);
  }
  return true;
}

#else  // !SLM_HAVE_VNNI_KERNELS

double AvxVnniDotLoop(int64_t, int32_t*) { return 0; }

bool MatMulQ8DynColumnsAvxVnni(const int8_t*, const float*, const int8_t*, const float*, const float*,
                               float*, int64_t, int64_t, int64_t, int64_t, int64_t) {
  return false;
}
bool MatMulQ4DynColumnsAvxVnni(const int8_t*, const float*, const int32_t*, const uint8_t*,
                               const float*, const float*, const float*, float*, int64_t, int64_t,
                               int64_t, int64_t, int64_t, int64_t) {
  return false;
}

#endif  // SLM_HAVE_VNNI_KERNELS

}  // namespace slm::kernels
