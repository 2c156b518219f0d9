// AVX-VNNI body of the weight-only int4 decode product (R < kQ4SplitXMaxRows rows of f32 x): the
// split-x kernel of matmul_q4_split_x.cc at half width, for CPUs with AVX-VNNI and no AVX-512
// (Intel Alder Lake and later client cores), where MatMulQ4Columns' dispatch would otherwise run
// the Highway AVX2 tile (per 32 weights: widen, mask and shift the nibbles, convert, a
// dequantizing FMA and the FMA with x; compute-bound at 16–23 tok/s on the 1B shape).
//
// x is split per 8 values into three int8 parts (x = s·(q1 + q2/128 + q3/16384), s = max|x|/127
// over the 8), so x keeps ~2⁻²² of its lane's largest |x| (precision: matmul_q4_split_x.cc), and
// every 64 weights cost 6 vpdpbusd on the raw nibbles, the parts combined in the int32
// accumulator (shifted left 7 between parts; |lane| < 2²⁸), minus the x-only constant
// 8·Σ(16384·q1 + 128·q2 + q3) per lane so that the float conversion rounds Σ (q − 8)·x̂. Each
// lane then gets its group scale × its x scale.
//
// Layout: a 32-byte load is one step of 64 weights, two 32-weight Q4 blocks (quant_kernels.h):
// byte 16b + j holds weights 32b + j (low nibble) and 32b + 16 + j (high nibble). Lane i of a
// vpdpbusd covers bytes 4i..4i+3, i.e. block i/4 and, within it, weights 4(i%4)..+3 of each half:
// the low-nibble operand of x is the 16 first-half values of block 0 then of block 1, the
// high-nibble operand the second halves; lanes 0-3 take block 0's group scale, 4-7 block 1's.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/decode_prefetch.h"
#include "kernels/matmul_q4_split_x.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/vnni_intrinsics.h"

namespace slm::kernels {

#if SLM_HAVE_VNNI_KERNELS

namespace {

constexpr size_t kStep = 64;              // weights per 32-byte load
constexpr size_t kStepPartBytes = 3 * 64;  // per step: parts 1-3 × (32 low-half, 32 high-half bytes)

using vnni::Dpbusd256;
using vnni::PackBytes256;
using vnni::ReduceAdd256;

// One x row split for the tile: per step t, parts[t] (kStepPartBytes: part p's low-half bytes at
// 64·p, high-half bytes at 64·p + 32), centre[8t..8t+8) (per lane: 8 · Σ of the combined parts
// of its 8 x) and lane_scales[8t..8t+8) (s / 16384; NaN where the lane's x has a NaN or an
// infinity, so that the outputs it touches are NaN, as in f32).
SLM_AVXVNNI_TARGET void SplitX(const float* x, int8_t* parts, int32_t* centre, float* lane_scales, size_t steps) {
  const __m256 sign = _mm256_set1_ps(-0.0f), step = _mm256_set1_ps(128.0f);
  const __m256 inf = _mm256_set1_ps(INFINITY), nan = _mm256_set1_ps(NAN);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (size_t t = 0; t < steps; ++t) {
    int8_t* pt = parts + t * kStepPartBytes;
    for (size_t b = 0; b < 2; ++b) {
      const float* xb = x + t * kStep + 32 * b;
      // v = 0, 1: the first-half values 8v..8v+7 (lanes 2v, 2v + 1 of the block, one per
      // 128-bit half) and the second-half values at the same positions.
      for (size_t v = 0; v < 2; ++v) {
        const __m256 lo = _mm256_loadu_ps(xb + 8 * v), hi = _mm256_loadu_ps(xb + 16 + 8 * v);
        const __m256 alo = _mm256_andnot_ps(sign, lo), ahi = _mm256_andnot_ps(sign, hi);
        __m256 m = _mm256_max_ps(alo, ahi);  // then the max of each 128-bit half, in all of it
        m = _mm256_max_ps(m, _mm256_permute_ps(m, 0xB1));
        m = _mm256_max_ps(m, _mm256_permute_ps(m, 0x4E));
        // Non-finite (|x| >= inf or NaN) anywhere in a half: that lane's scale becomes NaN.
        __m256 bad = _mm256_or_ps(_mm256_cmp_ps(alo, inf, _CMP_NLT_UQ), _mm256_cmp_ps(ahi, inf, _CMP_NLT_UQ));
        bad = _mm256_or_ps(bad, _mm256_permute_ps(bad, 0xB1));
        bad = _mm256_or_ps(bad, _mm256_permute_ps(bad, 0x4E));
        // x / s rather than x · (127 / max): 127 / max overflows for max below ~1e-37.
        const __m256 scale = _mm256_mul_ps(m, _mm256_set1_ps(1.0f / 127.0f));
        const __m256 usable = _mm256_andnot_ps(bad, _mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_GT_OQ));
        const __m256 lane_scale = _mm256_blendv_ps(_mm256_mul_ps(scale, _mm256_set1_ps(1.0f / 16384.0f)), nan, bad);
        // Lanes 4b + 2v and 4b + 2v + 1: elements 0 and 4 of lane_scale.
        lane_scales[8 * t + 4 * b + 2 * v] = _mm256_cvtss_f32(lane_scale);
        lane_scales[8 * t + 4 * b + 2 * v + 1] = _mm_cvtss_f32(_mm256_extractf128_ps(lane_scale, 1));
        __m256i combined[2];
        for (size_t h = 0; h < 2; ++h) {
          const __m256 t0 = _mm256_and_ps(_mm256_div_ps(h == 0 ? lo : hi, scale), usable);
          const __m256 q1 = _mm256_round_ps(t0, kRound);
          const __m256 r1 = _mm256_mul_ps(_mm256_sub_ps(t0, q1), step);  // both steps exact
          const __m256 q2 = _mm256_round_ps(r1, kRound);
          const __m256 q3 = _mm256_round_ps(_mm256_mul_ps(_mm256_sub_ps(r1, q2), step), kRound);
          const __m256i i1 = _mm256_cvtps_epi32(q1), i2 = _mm256_cvtps_epi32(q2), i3 = _mm256_cvtps_epi32(q3);
          // Bytes 16b + 8v.. of the half's operand (block b's values 8v..8v+7 of this half).
          int8_t* out = pt + 32 * h + 16 * b + 8 * v;
          const int64_t p1 = PackBytes256(i1), p2 = PackBytes256(i2), p3 = PackBytes256(i3);
          std::memcpy(out, &p1, 8);
          std::memcpy(out + 64, &p2, 8);
          std::memcpy(out + 128, &p3, 8);
          combined[h] = _mm256_add_epi32(_mm256_slli_epi32(_mm256_add_epi32(_mm256_slli_epi32(i1, 7), i2), 7), i3);
        }
        // Per lane (128-bit half): 8 · Σ of its 4 + 4 combined values.
        __m256i s = _mm256_add_epi32(combined[0], combined[1]);
        s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0xB1));
        s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4E));
        centre[8 * t + 4 * b + 2 * v] = 8 * _mm256_cvtsi256_si32(s);
        centre[8 * t + 4 * b + 2 * v + 1] = 8 * _mm_cvtsi128_si32(_mm256_extracti128_si256(s, 1));
      }
    }
  }
}

// The group scales of a step as lanes (0-3: its first block, 4-7: its second): with G = 32 the two
// scales from `first` on, else the one at `first`.
template <bool kG32>
SLM_AVXVNNI_TARGET inline __m256 StepScales(const float* first) {
  if constexpr (kG32) {
    const __m128 two = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(first)));
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  } else {
    return _mm256_broadcast_ss(first);
  }
}

// y[0..kN) = the dots of one split x row with kN weight rows streamed together (+ bias[0..kN) when
// not null), the row's outputs of those weight rows; each prefetching
// the same line of the next tile's row and, over the first lines, the next tile's scales.
template <bool kG32, size_t kN>
SLM_AVXVNNI_TARGET inline void Tile(const float* x, const int8_t* parts, const int32_t* centre,
                                    const float* lane_scales, const float* xg, const uint8_t* w,
                                    const float* scales, const float* offsets, size_t K, size_t G,
                                    const float* bias, float* y) {
  const size_t row_bytes = K / 2, groups = K / G, steps = K / kStep, scale_lines = (groups + 15) / 16;
  __m256 acc[kN];
  for (size_t r = 0; r < kN; ++r) acc[r] = _mm256_setzero_ps();
  // The step's first scale index (2t with G = 32, else t / (G / 64)), stepped without a division.
  const size_t steps_per_group = kG32 ? 1 : G / kStep;
  size_t first_scale = 0, into_group = 0;
  for (size_t t = 0; t < steps; ++t) {
    const int8_t* pt = parts + t * kStepPartBytes;
    const __m256i x1l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pt));
    const __m256i x1h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pt + 32));
    const __m256i x2l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pt + 64));
    const __m256i x2h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pt + 96));
    const __m256i x3l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pt + 128));
    const __m256i x3h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pt + 160));
    const __m256i cc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(centre + 8 * t));
    const __m256 bs = _mm256_loadu_ps(lane_scales + 8 * t);
    // Running row pointers, and the prefetch tests once per step: worked out per row they cost
    // ~10 scalar instructions each (the AVX-512 tile, matmul_q4_split_x.cc).
    const uint8_t* wt = w + t * (kStep / 2);
    const float* sc = scales + first_scale;
    if (t % 2 == 0) {  // a line: the same line of the next tile's rows, and its scales' lines
      const size_t ahead = kN * row_bytes;
      for (size_t r = 0; r < kN; ++r) PrefetchDecodeLine(wt + r * row_bytes + ahead);
      if (t / 2 < scale_lines) {
        for (size_t r = 0; r < kN; ++r) PrefetchDecodeLine(scales + (r + kN) * groups + 8 * t);
      }
    }
#pragma GCC unroll 8
    for (size_t r = 0; r < kN; ++r, wt += row_bytes, sc += groups) {
      __m256i lo, hi;
      vnni::LoadNibbles256(wt, lo, hi);
      __m256i d = Dpbusd256(Dpbusd256(_mm256_setzero_si256(), lo, x1l), hi, x1h);
      d = Dpbusd256(Dpbusd256(_mm256_slli_epi32(d, 7), lo, x2l), hi, x2h);
      d = Dpbusd256(Dpbusd256(_mm256_slli_epi32(d, 7), lo, x3l), hi, x3h);
      const __m256 f = _mm256_mul_ps(StepScales<kG32>(sc), bs);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(d, cc)), f, acc[r]);
    }
    if (kG32) {
      first_scale += 2;
    } else if (++into_group == steps_per_group) {
      into_group = 0;
      ++first_scale;
    }
  }
  for (size_t r = 0; r < kN; ++r) {
    const float* sr = scales + r * groups;
    float dot = ReduceAdd256(acc[r]);
    if (offsets != nullptr) {  // Σ_g (o_g + 8·s_g)·Σ_{k∈g} x: the asymmetric groups' second term
      const float* orow = offsets + r * groups;
      __m256 o = _mm256_setzero_ps();
      size_t g = 0;
      for (; g + 8 <= groups; g += 8) {
        const __m256 og = _mm256_fmadd_ps(_mm256_set1_ps(8.0f), _mm256_loadu_ps(sr + g), _mm256_loadu_ps(orow + g));
        o = _mm256_fmadd_ps(og, _mm256_loadu_ps(xg + g), o);
      }
      dot += ReduceAdd256(o);
      for (; g < groups; ++g) dot += (orow[g] + 8.0f * sr[g]) * xg[g];
    }
    dot += vnni::Q4TailBlocks(x, w + r * row_bytes, sr, steps * kStep, K, G);
    y[r] = bias ? dot + bias[r] : dot;
  }
}

template <bool kG32>
SLM_AVXVNNI_TARGET void Rows(const float* x, const uint8_t* w, const float* scales, const float* offsets,
                             const float* bias, float* y, size_t R, size_t K, size_t N, size_t G, size_t n_begin,
                             size_t n_end) {
  const size_t groups = K / G, row_bytes = K / 2, steps = K / kStep;
  // Scratch, 32-byte aligned pieces: the group sums (with offsets), then per step 8 lane scales,
  // 8 centres and the parts.
  const size_t xg_floats = (groups + 7) / 8 * 8;
  uint8_t* scratch = vnni::ThreadScratch(31 + 4 * xg_floats + steps * (4 * 8 + 4 * 8 + kStepPartBytes));
  float* xg = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 31) / 32 * 32);
  float* lane_scales = xg + xg_floats;
  int32_t* centre = reinterpret_cast<int32_t*>(lane_scales + 8 * steps);
  int8_t* parts = reinterpret_cast<int8_t*>(centre + 8 * steps);
  for (size_t r = 0; r < R; ++r) {
    const float* xr = x + r * K;
    SplitX(xr, parts, centre, lane_scales, steps);
    if (offsets != nullptr) {
      for (size_t g = 0; g < groups; ++g) {
        __m256 s = _mm256_setzero_ps();
        for (size_t k = g * G; k < (g + 1) * G; k += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(xr + k));
        xg[g] = ReduceAdd256(s);
      }
    }
    size_t c = n_begin;
    const auto tiles = [&](auto n_tag) SLM_AVXVNNI_TARGET __attribute__((always_inline)) {
      constexpr size_t kN = decltype(n_tag)::value;
      for (; c + kN <= n_end; c += kN) {
        Tile<kG32, kN>(xr, parts, centre, lane_scales, xg, w + c * row_bytes, scales + c * groups,
                       offsets ? offsets + c * groups : nullptr, K, G, bias ? bias + c : nullptr, y + r * N + c);
      }
    };
    // 8 weight rows at a time where rows are 1 KB or less, else 4 (as the AVX-512 body's 16 / 8;
    // with 16 ymm registers the six x parts and 8 accumulators do not all stay in registers —
    // the 8-row step is 263 instructions for 48 vpdpbusd — yet the tile still gained).
    // 1B int4 decode, --simd-target AVX2 --profile, 3 alternated rounds in a slow-memory phase:
    // gate/up_proj 0.77-0.84 -> 0.72-0.73 of the f32 lm_head's time; down_proj at 8 rows
    // 0.74-0.78 -> 0.74-0.82 (so 4 there).
    if (row_bytes <= 1024) tiles(std::integral_constant<size_t, 8>{});
    tiles(std::integral_constant<size_t, 4>{});
    tiles(std::integral_constant<size_t, 1>{});
  }
}

}  // namespace

bool MatMulQ4ColumnsSplitXAvxVnni(const float* x, const uint8_t* w, const float* scales,
                                  const float* offsets, const float* bias, float* y, int64_t R, int64_t K,
                                  int64_t N, int64_t G, int64_t n_begin, int64_t n_end) {
  // Whole 64-weight steps (a 32-weight tail only with G = 32); a group is 32 or whole steps.
  if (R >= kQ4SplitXMaxRows || K < int64_t(kStep) || (G != 32 && G % int64_t(kStep) != 0) ||
      !AvxVnniAvailable() || VnniAvailable()) {
    return false;
  }
  const size_t r = size_t(R), k = size_t(K), n = size_t(N), g = size_t(G);
  if (G == 32) Rows<true>(x, w, scales, offsets, bias, y, r, k, n, g, size_t(n_begin), size_t(n_end));
  else Rows<false>(x, w, scales, offsets, bias, y, r, k, n, g, size_t(n_begin), size_t(n_end));
  return true;
}

#else  // !SLM_HAVE_VNNI_KERNELS

bool MatMulQ4ColumnsSplitXAvxVnni(const float*, const uint8_t*, const float*, const float*, const float*,
                                  float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) {
  return false;
}

#endif  // SLM_HAVE_VNNI_KERNELS

}  // namespace slm::kernels
