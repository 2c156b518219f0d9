// Highway-target body of the 8da4w decode product (R < 4 rows of int8 x, int4 weights) on AVX2
// CPUs without VNNI (Zen 1–3, Intel before Ice Lake / Alder Lake), used by MatMulQ4DynColumns
// (matmul_q-inl.h) where it applies.
//
// Why: the generic tile (Q4DynTile) widens the nibbles and x to int16 and multiplies them with
// vpmaddwd: 16 products per multiply, plus a lane reduction and a gather of four scales per group
// of every 4 weight rows. On Zen 2 it ran 8da4w decode of the 1B shape compute-bound at ~12
// cycles per 64 weights of one row (`BM_MatMulQ4DynG32/R:1/K:2048/N:512` from L3 at 11 GB/s of
// weights on one thread; docs/benchmarks.md, thirty-seventh session).
//
// How: vpmaddubsw multiplies 32 unsigned bytes by 32 signed ones and adds neighbours into 16
// int16 lanes — the nibbles (0..15) are the unsigned operand, xq the signed one, and no pair can
// saturate (2·15·128 < 2^15). The step and the order of the outputs are the AVX-VNNI decode tile's
// (matmul_q_avxvnni.cc): a 32-byte load is 64 k, two 32-k blocks whose byte j holds
// q[32b + j] | q[32b + 16 + j] << 4, so x is taken per 64 k as its "low" bytes (k 0-15, 32-47)
// and its "high" bytes (16-31, 48-63) and the low and high nibbles' products of one block land in
// one 128-bit half. Each int16 lane of a row's step then holds 4 products (|lane| ≤ 4·15·128 =
// 7680), so two vphaddw over 4 weight rows sum 4 lanes each without overflow (≤ 30720) and one
// vpmaddwd by ones gives, per half b, the int32 block sums [row 0, 1, 2, 3] that vpdpbusd and the
// AVX-VNNI lane reduction give there: exact, so folded in group order (the 8da4w order of
// quant_kernels.h) the outputs are the other bodies' bits.
//
// Which rows a tile streams together: rows under 4 KB (K < 8192) one per 4 KB page, `spread` =
// 4096 / row bytes apart (decode_row_order.h: Zen 2's prefetchers did not follow 4 adjacent 1 KB
// rows, which are 4 streams in one page).
//
// Measured on Zen 2 (docs/benchmarks.md, thirty-seventh session): `BM_MatMulQ4DynG32/R:1/K:2048/
// N:512` (one thread, weights from L3) 11.0 → 22.1 GB/s with adjacent rows; the 1B decode walk
// `BM_DecodeLayersQ4DynG32` 10.2 / 19.3 GB/s (1 / 2 threads) with the Highway tile, the same
// with this one on adjacent rows, 13.1 / 24.0 with the rows spread. 1B 8da4w decode on 2 threads,
// alternated against the Highway tile: 30.1 / 27.7 → 39.2 / 36.9 tok/s; twenty-first table 40.55
// (77.0% of the DRAM bound).

#if defined(SLM_KERNELS_MATMUL_Q4_DYN256_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_MATMUL_Q4_DYN256_INL_H_
#undef SLM_KERNELS_MATMUL_Q4_DYN256_INL_H_
#else
#define SLM_KERNELS_MATMUL_Q4_DYN256_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/decode_prefetch.h"
#include "kernels/decode_row_order.h"
#include "kernels/q4_dyn_folds256.h"
#include "kernels/vnni_intrinsics.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

// The tile's step lambda is inlined (GCC 12 compiled it as an out-of-line call that passed the
// accumulators through memory).
#define SLM_Q4DYN256_INLINE __attribute__((always_inline))

// True where the tile applies: whole 64-k steps, and groups that a step holds two of (G = 32),
// one of, or that span whole steps.
HWY_INLINE bool Q4Dyn256Apply(size_t K, size_t G) { return K % 64 == 0 && (G == 32 || G % 64 == 0); }

// Per 128-bit half b: [Σ p0, Σ p1, Σ p2, Σ p3] as int32, of four vectors of int16 lanes each
// within ±7680 (the sum of a half's 8 lanes is exact in int16 after two pairwise adds of 4 rows).
HWY_INLINE __m256i Q4Dyn256BlockSums(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  const __m256i quads = _mm256_hadd_epi16(_mm256_hadd_epi16(p0, p1), _mm256_hadd_epi16(p2, p3));
  return _mm256_madd_epi16(quads, _mm256_set1_epi16(1));
}

// One row of xq × kN weight rows `stride` rows apart (4, or 1 at the edge); K % 64 == 0;
// group_sums: the row's [K / G] Σxq per group. The block sums of each step are folded by
// vnni::Q4DynFolds256 (q4_dyn_folds256.h, shared with the AVX-VNNI tile). Per 64-byte line of
// each weight row (two steps) one prefetch of the next tile's line (`next` rows on:
// ForEachDecodeTile, decode_row_order.h) and, over the first lines, of the next tile's scales.
template <int kN, vnni::Q4Groups kG, bool kAsym>
HWY_INLINE void Q4Dyn256Tile(const int8_t* HWY_RESTRICT xq, float xscale, const int32_t* group_sums,
                             const uint8_t* w, const float* scales, const float* offsets,
                             const float* bias, float* y, size_t K, size_t G, size_t stride, size_t next) {
  static_assert(kN == 4 || kN == 1, "4 or 1 weight rows");
  const size_t groups = K / G, row_bytes = K / 2, steps = K / 64, scale_lines = (groups + 15) / 16;
  const size_t rb = stride * row_bytes, rg = stride * groups;  // between the tile's rows
  vnni::Q4DynFolds256<1, kN, kG, kAsym> folds(group_sums, scales, offsets, groups, stride, G);
  const auto step = [&](size_t t) SLM_Q4DYN256_INLINE {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * t));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * t + 32));
    const __m256i xl = _mm256_permute2x128_si256(a, b, 0x20), xh = _mm256_permute2x128_si256(a, b, 0x31);
    folds.BeginStep(t);
    __m256i p[4];
    HWY_UNROLL(4)
    for (int j = 0; j < 4; ++j) {
      if (j >= kN) {
        p[j] = _mm256_setzero_si256();
        continue;
      }
      __m256i lo, hi;
      vnni::LoadNibbles256(w + j * rb + 32 * t, lo, hi);
      p[j] = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
    }
    folds.Step(0, Q4Dyn256BlockSums(p[0], p[1], p[2], p[3]));
  };
  size_t t = 0;
  for (size_t line = 0; t + 2 <= steps; t += 2, ++line) {
    HWY_UNROLL(4)
    for (int n = 0; n < kN; ++n) {
      PrefetchDecodeLine(w + n * rb + next * row_bytes + 32 * t);
      if (line < scale_lines) {
        PrefetchDecodeLine(scales + n * rg + next * groups + 16 * line);
        if constexpr (kAsym) PrefetchDecodeLine(offsets + n * rg + next * groups + 16 * line);
      }
    }
    step(t);
    step(t + 1);
  }
  if (t < steps) step(t);  // K % 128 == 64: the last half line
  folds.Store(xscale, bias, y);
}

// Columns [n_begin, n_end) of each of the R rows of x: tiles of 4 weight rows, rows under 4 KB
// one per page (ForEachDecodeTile, decode_row_order.h), then single rows.
template <vnni::Q4Groups kG, bool kAsym>
HWY_NOINLINE void Q4Dyn256Rows(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                               const uint8_t* w, const float* scales, const float* offsets,
                               const float* bias, float* y, size_t R, size_t K, size_t N, size_t G,
                               size_t n_begin, size_t n_end) {
  constexpr int kN = 4;
  const size_t groups = K / G, row_bytes = K / 2;
  for (size_t r = 0; r < R; ++r) {
    const auto tile = [&](auto rows_tag, size_t c, size_t stride, size_t next) {
      Q4Dyn256Tile<decltype(rows_tag)::value, kG, kAsym>(
          xq + r * K, xscale[r], group_sums + r * groups, w + c * row_bytes, scales + c * groups,
          kAsym ? offsets + c * groups : nullptr, bias ? bias + c : nullptr, y + r * N + c, K, G, stride, next);
    };
    ForEachDecodeTile<kN>(n_begin, n_end, DecodeRowSpread(row_bytes), tile);
  }
}

HWY_INLINE void Q4Dyn256Columns(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                                const uint8_t* w, const float* scales, const float* offsets,
                                const float* bias, float* y, size_t R, size_t K, size_t N, size_t G,
                                size_t n_begin, size_t n_end) {
  const auto run = [&](auto rows) { rows(xq, xscale, group_sums, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end); };
  const bool asym = offsets != nullptr;
  if (G == 32) return run(asym ? Q4Dyn256Rows<vnni::Q4Groups::k32, true> : Q4Dyn256Rows<vnni::Q4Groups::k32, false>);
  if (G == 64) return run(asym ? Q4Dyn256Rows<vnni::Q4Groups::k64, true> : Q4Dyn256Rows<vnni::Q4Groups::k64, false>);
  run(asym ? Q4Dyn256Rows<vnni::Q4Groups::kMulti, true> : Q4Dyn256Rows<vnni::Q4Groups::kMulti, false>);
}

#undef SLM_Q4DYN256_INLINE

#endif  // HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_MATMUL_Q4_DYN256_INL_H_
