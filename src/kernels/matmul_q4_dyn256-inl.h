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
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/decode_prefetch.h"
#include "kernels/decode_row_order.h"
#include "kernels/vnni_intrinsics.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

// The tile's lambdas are inlined (GCC 12 compiled the step as an out-of-line call that passed the
// accumulators through memory).
#define SLM_Q4DYN256_INLINE __attribute__((always_inline))

// True where the tile applies: whole 64-k steps, and groups that a step holds two of (G = 32),
// one of, or that span whole steps.
HWY_INLINE bool Q4Dyn256Apply(size_t K, size_t G) { return K % 64 == 0 && (G == 32 || G % 64 == 0); }

// The group sizes the tile folds: 32 (two groups per 64-k step), 64 (one per step) or a multiple
// of 64 (one per G / 64 steps). A template parameter, so each tile's loop has one path.
enum class Q4Dyn256Groups { k32, k64, kMulti };

// Per 128-bit half b: [Σ p0, Σ p1, Σ p2, Σ p3] as int32, of four vectors of int16 lanes each
// within ±7680 (the sum of a half's 8 lanes is exact in int16 after two pairwise adds of 4 rows).
HWY_INLINE __m256i Q4Dyn256BlockSums(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  const __m256i quads = _mm256_hadd_epi16(_mm256_hadd_epi16(p0, p1), _mm256_hadd_epi16(p2, p3));
  return _mm256_madd_epi16(quads, _mm256_set1_epi16(1));
}

// One row of xq × kN weight rows `stride` rows apart (4, or 1 at the edge; 8 would be two sets of
// 4); K % 64 == 0; group_sums: the row's [K / G] Σxq per group. The outputs form sets of 4 (lane
// j = weight row 4s + j; a single row is a set with lanes 1-3 zero), each with one f32
// accumulator. Per 64-byte line of each weight row (two steps) one prefetch of the next tile's
// line (`next` rows on: ForEachDecodeTile, decode_row_order.h) and, over the first lines, of the
// next tile's scales.
template <int kN, Q4Dyn256Groups kG, bool kAsym>
HWY_INLINE void Q4Dyn256Tile(const int8_t* HWY_RESTRICT xq, float xscale, const int32_t* group_sums,
                             const uint8_t* w, const float* scales, const float* offsets,
                             const float* bias, float* y, size_t K, size_t G, size_t stride, size_t next) {
  static_assert(kN == 8 || kN == 4 || kN == 1, "8, 4 or 1 weight rows");
  constexpr int kSets = (kN + 3) / 4;
  constexpr int kSetRows = kN < 4 ? kN : 4;
  const size_t groups = K / G, row_bytes = K / 2, steps = K / 64, scale_lines = (groups + 15) / 16;
  const size_t steps_per_group = kG == Q4Dyn256Groups::kMulti ? G / 64 : 1;
  const size_t rb = stride * row_bytes, rg = stride * groups;  // between the tile's rows
  __m128 acc[kSets];
  __m128i pending[kSets];  // kMulti: the current group's dots over its steps
  HWY_UNROLL(2)
  for (int s = 0; s < kSets; ++s) {
    acc[s] = _mm_setzero_ps();
    pending[s] = _mm_setzero_si128();
  }
  // Lane j: v[(4s + j) · stride · groups + g] for the set's weight rows (0 past kSetRows).
  const auto by_row = [&](const float* v, int s, size_t g) SLM_Q4DYN256_INLINE {
    if constexpr (kSetRows == 4) {
      const float* p = v + 4 * s * rg + g;
      return _mm_setr_ps(p[0], p[rg], p[2 * rg], p[3 * rg]);
    } else {
      return _mm_setr_ps(v[g], 0.0f, 0.0f, 0.0f);
    }
  };
  // acc[s] (+)= group g's dots d (lane per weight row of set s), in the 8da4w order.
  const auto fold = [&](int s, size_t g, __m128i d) SLM_Q4DYN256_INLINE {
    const __m128i gs = _mm_set1_epi32(group_sums[g]);
    const __m128 scale = by_row(scales, s, g);
    if constexpr (!kAsym) {
      acc[s] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_sub_epi32(d, _mm_slli_epi32(gs, 3))), scale, acc[s]);
    } else {
      acc[s] = _mm_fmadd_ps(_mm_cvtepi32_ps(gs), by_row(offsets, s, g), _mm_fmadd_ps(_mm_cvtepi32_ps(d), scale, acc[s]));
    }
  };
  // G = 32, 4 weight rows: the step's groups g, g + 1 at once, per row the two scales in one 8-byte
  // load transposed to [rows at g] and [rows at g + 1]; folded in order g, then g + 1.
  const auto fold_step_g32 = [&](int s, size_t t, __m256i M, __m256i gs) SLM_Q4DYN256_INLINE {
    const size_t g = 2 * t;
    const auto pairs = [&](const float* v, __m128* at_g, __m128* at_g1) SLM_Q4DYN256_INLINE {
      const float* p = v + 4 * s * rg + g;
      const auto two = [](const float* q) { return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))); };
      const __m128 r01 = _mm_unpacklo_ps(two(p), two(p + rg));  // [r0 g, r1 g, r0 g+1, r1 g+1]
      const __m128 r23 = _mm_unpacklo_ps(two(p + 2 * rg), two(p + 3 * rg));
      *at_g = _mm_movelh_ps(r01, r23);
      *at_g1 = _mm_movehl_ps(r23, r01);
    };
    __m128 s0, s1;
    pairs(scales, &s0, &s1);
    if constexpr (!kAsym) {
      const __m256 D = _mm256_cvtepi32_ps(_mm256_sub_epi32(M, _mm256_slli_epi32(gs, 3)));
      acc[s] = _mm_fmadd_ps(_mm256_castps256_ps128(D), s0, acc[s]);
      acc[s] = _mm_fmadd_ps(_mm256_extractf128_ps(D, 1), s1, acc[s]);
    } else {
      __m128 o0, o1;
      pairs(offsets, &o0, &o1);
      const __m256 D = _mm256_cvtepi32_ps(M), GS = _mm256_cvtepi32_ps(gs);
      acc[s] = _mm_fmadd_ps(_mm256_castps256_ps128(GS), o0, _mm_fmadd_ps(_mm256_castps256_ps128(D), s0, acc[s]));
      acc[s] = _mm_fmadd_ps(_mm256_extractf128_ps(GS, 1), o1, _mm_fmadd_ps(_mm256_extractf128_ps(D, 1), s1, acc[s]));
    }
  };
  size_t into_group = 0;  // kMulti: steps of the current group done
  const auto step = [&](size_t t) SLM_Q4DYN256_INLINE {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * t));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * t + 32));
    const __m256i xl = _mm256_permute2x128_si256(a, b, 0x20), xh = _mm256_permute2x128_si256(a, b, 0x31);
    const bool group_ends = kG == Q4Dyn256Groups::kMulti && ++into_group == steps_per_group;
    if (group_ends) into_group = 0;
    __m256i gs_pair = _mm256_setzero_si256();  // G = 32: [Σxq of group 2t ×4, of 2t + 1 ×4]
    if constexpr (kG == Q4Dyn256Groups::k32 && kSetRows == 4) {
      gs_pair = _mm256_permutevar8x32_epi32(
          _mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(group_sums + 2 * t))),
          _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    }
    HWY_UNROLL(2)
    for (int s = 0; s < kSets; ++s) {
      __m256i p[4];
      HWY_UNROLL(4)
      for (int j = 0; j < 4; ++j) {
        if (j >= kSetRows) {
          p[j] = _mm256_setzero_si256();
          continue;
        }
        __m256i lo, hi;
        vnni::LoadNibbles256(w + (4 * s + j) * rb + 32 * t, lo, hi);
        p[j] = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
      }
      const __m256i M = Q4Dyn256BlockSums(p[0], p[1], p[2], p[3]);  // half b: block 2t + b
      const __m128i b0 = _mm256_castsi256_si128(M), b1 = _mm256_extracti128_si256(M, 1);
      if constexpr (kG == Q4Dyn256Groups::k32 && kSetRows == 4) {
        fold_step_g32(s, t, M, gs_pair);
      } else if constexpr (kG == Q4Dyn256Groups::k32) {
        fold(s, 2 * t, b0);
        fold(s, 2 * t + 1, b1);
      } else if constexpr (kG == Q4Dyn256Groups::k64) {
        fold(s, t, _mm_add_epi32(b0, b1));
      } else {
        pending[s] = _mm_add_epi32(pending[s], _mm_add_epi32(b0, b1));
        if (group_ends) {
          fold(s, (t + 1) / steps_per_group - 1, pending[s]);
          pending[s] = _mm_setzero_si128();
        }
      }
    }
  };
  size_t t = 0;
  for (size_t line = 0; t + 2 <= steps; t += 2, ++line) {
    HWY_UNROLL(8)
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
  HWY_UNROLL(2)
  for (int s = 0; s < kSets; ++s) {
    alignas(16) float out[4];
    const auto at = [&](int j) { return bias != nullptr && j < kSetRows ? bias[(4 * s + j) * stride] : 0.0f; };
    // y = fma(acc, x_scale, bias or 0): Q4DynFinish.
    _mm_store_ps(out, _mm_fmadd_ps(acc[s], _mm_set1_ps(xscale), _mm_setr_ps(at(0), at(1), at(2), at(3))));
    for (int j = 0; j < kSetRows; ++j) y[(4 * s + j) * stride] = out[j];
  }
}

// Columns [n_begin, n_end) of each of the R rows of x: tiles of 4 weight rows, rows under 4 KB
// one per page (ForEachDecodeTile, decode_row_order.h), then single rows.
template <Q4Dyn256Groups kG, bool kAsym>
HWY_NOINLINE void Q4Dyn256Rows(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                               const uint8_t* w, const float* scales, const float* offsets,
                               const float* bias, float* y, size_t R, size_t K, size_t N, size_t G,
                               size_t n_begin, size_t n_end) {
  constexpr int kN = 4;
  const size_t groups = K / G, row_bytes = K / 2;
  for (size_t r = 0; r < R; ++r) {
    const auto tile = [&](auto rows_tag, size_t c, size_t stride, size_t next) SLM_Q4DYN256_INLINE {
      Q4Dyn256Tile<decltype(rows_tag)::value, kG, kAsym>(
          xq + r * K, xscale[r], group_sums + r * groups, w + c * row_bytes, scales + c * groups,
          kAsym ? offsets + c * groups : nullptr, bias ? bias + c : nullptr, y + r * N + c, K, G, stride, next);
    };
    ForEachDecodeTile<kN>(
        n_begin, n_end, DecodeRowSpread(row_bytes),
        [&](size_t c, size_t stride, size_t next) { tile(std::integral_constant<int, kN>{}, c, stride, next); },
        [&](size_t c) { tile(std::integral_constant<int, 1>{}, c, 1, 1); });
  }
}

HWY_INLINE void Q4Dyn256Columns(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                                const uint8_t* w, const float* scales, const float* offsets,
                                const float* bias, float* y, size_t R, size_t K, size_t N, size_t G,
                                size_t n_begin, size_t n_end) {
  const auto run = [&](auto rows) { rows(xq, xscale, group_sums, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end); };
  const bool asym = offsets != nullptr;
  if (G == 32) return run(asym ? Q4Dyn256Rows<Q4Dyn256Groups::k32, true> : Q4Dyn256Rows<Q4Dyn256Groups::k32, false>);
  if (G == 64) return run(asym ? Q4Dyn256Rows<Q4Dyn256Groups::k64, true> : Q4Dyn256Rows<Q4Dyn256Groups::k64, false>);
  run(asym ? Q4Dyn256Rows<Q4Dyn256Groups::kMulti, true> : Q4Dyn256Rows<Q4Dyn256Groups::kMulti, false>);
}

#undef SLM_Q4DYN256_INLINE

#endif  // HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_MATMUL_Q4_DYN256_INL_H_
