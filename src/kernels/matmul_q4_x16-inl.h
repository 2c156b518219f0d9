// Highway-target body of the weight-only int4 decode product (R < 4 rows of x) on AVX2 CPUs
// without VNNI (Zen 1–3, Intel before Ice Lake / Alder Lake), used by MatMulQ4Columns
// (matmul_q-inl.h) where it applies **when switched on** (SLM_INT4_X16=1 or SetInt4DecodeX16,
// quant_kernels.h): x rounded to 16 bits per 8 values, the codes multiplied with it by
// `vpmaddwd`. Off by default: the rounding moves the logits of the random-weight zoo models by up
// to 4e-4 of the largest one, past the int4 weight-only contract's tests (the logits of the f32
// model over the dequantized weights, prefill = decode and every SIMD target alike, to f32
// order); the default is the f32 planes tile of matmul_q4_planes256-inl.h.
//
// Why: with f32 products every 8 weights cost a mask, an add and an FMA on the FP pipes. The
// f32 planes tile that does so runs ~11–12 cycles per 64 weights and weight row on Zen 2,
// compute-bound: 1B int4 decode 28 tok/s, 50% of the DRAM bound. This one takes ~6.4–6.9 cycles
// (a throwaway loop in L1, the same machine): per 64 weights and row a load, 6 ops that put each
// nibble in a 16-bit word, 4 `vpmaddwd` (one pipe on Zen 2), 3 adds, a convert and two
// multiplications; 1B int4 decode 1.35× (`staticlm bench --ab int4-x16`: 27.9 → 37.7 tok/s, 49% →
// 66% of the DRAM bound; docs/benchmarks.md, thirty-ninth session).
//
// Precision (the cost): x is rounded to h·s, h an int16, s = max|x| / 32767 over the 8 values one
// int32 lane gathers, so each x keeps ~2⁻¹⁶ of its lane's largest |x| instead of f32's 2⁻²⁴ of
// itself. Measured against the f32 reference (test_kernels, `[ X16 ]` lines): ~1e-6 of Σ|x·ŵ| on
// uniform x, ~1e-5 next to channels 300× the rest (LLM hidden states) — finer than the f16
// activations of the usual W4A16 kernels, and 4 orders of magnitude below int4's weight error.
// The other int4 decode bodies keep f32 precision (AVX2 and AVX-512: f32 planes; VNNI and Arm:
// x split into three int8 parts); prefill (R ≥ 4) multiplies f32 x with the dequantized weights.
//
// How: a 32-byte load is one chunk of 64 weights (two Q4 blocks: byte 16b + B holds weights
// 32b + B, low nibble, and 32b + 16 + B, high nibble). Plane m of a chunk is nibble m of each of
// its 16 words (a shift and a mask), a code 0..15 per 16-bit lane; `vpmaddwd` with the
// matching 16 values of h sums pairs of words into 8 int32 lanes. Lane i covers words 2i, 2i+1,
// i.e. bytes 4i..4i+3: block i / 4, weights 4(i % 4)..+3 of each half — so across the 4 planes
// lane i sums exactly the 8 values that share its x scale. Per chunk and lane:
//   d = Σ_planes q·h (exact in int32: d < 2²²), then acc += float(d) · s_g · s_i
// (s_g the group scale), which is Σ q·x̂ · s_g; per row, Σ_g o_g · Σ_{k∈g} x̂ with o_g = −8·s_g
// (symmetric) or the group's offset (asymmetric) makes it Σ ŵ·x̂. The blocks past the whole
// chunks take the f32 tail (q − 8 with f32 x; asymmetric groups there add (o_g + 8·s_g)·Σx).
// Non-finite x makes its lane's scale NaN, and so every output NaN, as f32 would make them
// non-finite; lanes whose largest |x| is below ~1e-40 (scale 0) count as zero.

#if defined(SLM_KERNELS_MATMUL_Q4_X16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_MATMUL_Q4_X16_INL_H_
#undef SLM_KERNELS_MATMUL_Q4_X16_INL_H_
#else
#define SLM_KERNELS_MATMUL_Q4_X16_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/decode_prefetch.h"
#include "kernels/decode_row_order.h"
#include "kernels/matmul_q4_planes256-inl.h"
#include "kernels/vnni_intrinsics.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

// Chunks of 64 weights (kQ4Chunk256) and their group scales (ChunkScales256) as the f32 planes
// tile has them; the kernel applies where that one does (Q4Planes256Apply).
constexpr size_t kQ4X16Chunk = kQ4Chunk256;

// One x row rounded for the tiles, per chunk c of 64 values: words[64c + 16m + w] = h of the value
// that nibble m of the chunk's word w multiplies; lane_scales[8c + i] = s_i. Per group g,
// group_sums[g] = Σ_{k∈g} x̂_k (x̂ = h·s) over the whole chunks, Σ_{k∈g} x_k past them.
struct Q4X16Row {
  int16_t* words;
  float* lane_scales;
  float* group_sums;
};

// Rounds x (K values) into `out`. Per block b (32 values) the int32
// vectors of its halves' values (8v..8v+7 of the first half: A_v, of the second: B_v) give, as
// even and odd elements in order, words 8b..8b+7 of planes 0 (A even), 2 (A odd), 1 (B even)
// and 3 (B odd): byte B of a block holds values B (low nibble) and 16 + B (high nibble), and is
// the low (B even) or high (B odd) byte of word B/2; nibble m of a word is bits 4m..4m+3.
HWY_INLINE void RoundXTo16Bits(const float* HWY_RESTRICT x, size_t K, size_t G, const Q4X16Row& out) {
  const size_t chunks = K / kQ4X16Chunk;
  for (size_t g = 0; g < K / G; ++g) out.group_sums[g] = 0.0f;
  for (size_t k = chunks * kQ4X16Chunk; k < K; ++k) out.group_sums[k / G] += x[k];
  const __m256 sign = _mm256_set1_ps(-0.0f), inf = _mm256_set1_ps(INFINITY), nan = _mm256_set1_ps(NAN);
  const __m256 hmax = _mm256_set1_ps(32767.0f), hmin = _mm256_set1_ps(-32767.0f);
  for (size_t c = 0; c < chunks; ++c) {
    __m256i planes[4][2];  // [plane][block]: int32 words 8b..8b+7 of the plane
    for (size_t b = 0; b < 2; ++b) {
      __m256i first_half[2], second_half[2];
      // v = 0, 1: values 8v..8v+7 of block b's first half and the same of its second half; each
      // 128-bit half of them is one lane (4b + 2v, then 4b + 2v + 1).
      for (size_t v = 0; v < 2; ++v) {
        const float* xv = x + c * kQ4X16Chunk + 32 * b + 8 * v;
        const __m256 lo = _mm256_loadu_ps(xv), hi = _mm256_loadu_ps(xv + 16);
        const __m256 alo = _mm256_andnot_ps(sign, lo), ahi = _mm256_andnot_ps(sign, hi);
        __m256 m = _mm256_max_ps(alo, ahi);  // then the max of each 128-bit half, in all of it
        m = _mm256_max_ps(m, _mm256_permute_ps(m, 0xB1));
        m = _mm256_max_ps(m, _mm256_permute_ps(m, 0x4E));
        __m256 bad = _mm256_or_ps(_mm256_cmp_ps(alo, inf, _CMP_NLT_UQ), _mm256_cmp_ps(ahi, inf, _CMP_NLT_UQ));
        bad = _mm256_or_ps(bad, _mm256_permute_ps(bad, 0xB1));
        bad = _mm256_or_ps(bad, _mm256_permute_ps(bad, 0x4E));
        // x / s rather than x · (32767 / max): that quotient overflows for max below ~1e-34.
        const __m256 scale = _mm256_mul_ps(m, _mm256_set1_ps(1.0f / 32767.0f));
        const __m256 usable = _mm256_andnot_ps(bad, _mm256_cmp_ps(scale, _mm256_setzero_ps(), _CMP_GT_OQ));
        const __m256 lane_scale = _mm256_blendv_ps(scale, nan, bad);
        out.lane_scales[8 * c + 4 * b + 2 * v] = _mm256_cvtss_f32(lane_scale);
        out.lane_scales[8 * c + 4 * b + 2 * v + 1] = _mm_cvtss_f32(_mm256_extractf128_ps(lane_scale, 1));
        // |x / s| may round a hair over 32767 (more where s is subnormal): clamped to int16.
        const auto round = [&](__m256 xv) {
          const __m256 t = _mm256_and_ps(_mm256_div_ps(xv, scale), usable);
          return _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(t, hmax), hmin));
        };
        first_half[v] = round(lo);
        second_half[v] = round(hi);
        // Σ x̂ of both lanes (exact in int32, then one rounding) into block b's group.
        __m256i sum = _mm256_add_epi32(first_half[v], second_half[v]);
        sum = _mm256_add_epi32(sum, _mm256_shuffle_epi32(sum, 0xB1));
        sum = _mm256_add_epi32(sum, _mm256_shuffle_epi32(sum, 0x4E));
        const __m256 lane_sums = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), lane_scale);
        out.group_sums[(c * kQ4X16Chunk + 32 * b) / G] +=
            _mm256_cvtss_f32(lane_sums) + _mm_cvtss_f32(_mm256_extractf128_ps(lane_sums, 1));
      }
      // Even / odd elements of (v = 0 then v = 1), in order: in-lane shuffles, then the 64-bit
      // quarters put back in order.
      const auto elements = [](const __m256i (&half)[2], int odd) {
        const __m256 a = _mm256_castsi256_ps(half[0]), b = _mm256_castsi256_ps(half[1]);
        const __m256 picked = odd ? _mm256_shuffle_ps(a, b, 0xDD) : _mm256_shuffle_ps(a, b, 0x88);
        return _mm256_permute4x64_epi64(_mm256_castps_si256(picked), 0xD8);
      };
      planes[0][b] = elements(first_half, 0);
      planes[1][b] = elements(second_half, 0);
      planes[2][b] = elements(first_half, 1);
      planes[3][b] = elements(second_half, 1);
    }
    for (size_t m = 0; m < 4; ++m) {
      const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(planes[m][0], planes[m][1]), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.words + c * kQ4X16Chunk + 16 * m), words);
    }
  }
}

// Per lane i of one chunk of one weight row: Σ over the 8 values of lane i of q·h (int32, < 2²²).
HWY_INLINE __m256i Q4X16ChunkDot(const uint8_t* HWY_RESTRICT wc, const int16_t* HWY_RESTRICT hc) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wc));
  const __m256i nibble = _mm256_set1_epi16(0x000F);
  const auto h = [hc](size_t m) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hc + 16 * m)); };
  const __m256i p0 = _mm256_and_si256(v, nibble);
  const __m256i p1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
  const __m256i p2 = _mm256_and_si256(_mm256_srli_epi16(v, 8), nibble);
  const __m256i p3 = _mm256_srli_epi16(v, 12);
  return _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(p0, h(0)), _mm256_madd_epi16(p1, h(1))),
                          _mm256_add_epi32(_mm256_madd_epi16(p2, h(2)), _mm256_madd_epi16(p3, h(3))));
}

// The end of one weight row: the groups' constant terms (Σ_g o_g · Σ_{k∈g} x̂_k, o_g the offset
// of asymmetric groups and −8·s_g of symmetric ones: offsets_row null), the lane sum, and the
// blocks past the whole chunks (f32; the tail's f32 product takes q − 8, so asymmetric groups
// there add (o_g + 8·s_g) · Σ_{k∈g} x).
HWY_INLINE float Q4X16RowDot(__m256 acc, const float* x, const uint8_t* w_row, const float* scales_row,
                             const float* offsets_row, const float* group_sums, size_t K, size_t G) {
  const size_t whole = K / kQ4X16Chunk * kQ4X16Chunk, whole_groups = whole / G;
  const __m256 minus_eight = _mm256_set1_ps(-8.0f);
  size_t g = 0;
  for (; g + 8 <= whole_groups; g += 8) {
    const __m256 s = _mm256_loadu_ps(scales_row + g);
    const __m256 o = offsets_row ? _mm256_loadu_ps(offsets_row + g) : _mm256_mul_ps(minus_eight, s);
    acc = _mm256_fmadd_ps(o, _mm256_loadu_ps(group_sums + g), acc);
  }
  float rest = 0.0f;
  for (; g < whole_groups; ++g) rest += (offsets_row ? offsets_row[g] : -8.0f * scales_row[g]) * group_sums[g];
  if (offsets_row) {
    for (; g < K / G; ++g) rest += (offsets_row[g] + 8.0f * scales_row[g]) * group_sums[g];
  }
  return vnni::ReduceAdd256(acc) + rest + vnni::Q4TailBlocks(x, w_row, scales_row, whole, K, G);
}

// out[0..kN) = the dots of one rounded x row with kN weight rows `stride` rows apart, each step
// prefetching the same line of the next tile's rows (`next` rows on: ForEachDecodeTile) and,
// once per line, the next tile's scales.
template <size_t kScales, size_t kN>
HWY_INLINE void Q4X16Tile(const float* HWY_RESTRICT x, const Q4X16Row& xr, const uint8_t* w, const float* scales,
                          const float* offsets, size_t K, size_t G, size_t stride, size_t next, float* out) {
  const size_t row_bytes = K / 2, groups = K / G, chunks = K / kQ4X16Chunk;
  const size_t rb = stride * row_bytes, rg = stride * groups;  // between the tile's rows
  __m256 acc[kN];
  HWY_UNROLL(4)
  for (size_t r = 0; r < kN; ++r) acc[r] = _mm256_setzero_ps();
  vnni::Q4ChunkScaleIndex<kScales> s(G, kQ4X16Chunk);  // this chunk's first scale index
  for (size_t c = 0; c < chunks; ++c, s.Next()) {
    if (c % 2 == 0) {  // one prefetch per 64-byte line
      HWY_UNROLL(4)
      for (size_t r = 0; r < kN; ++r) PrefetchDecodeLine(w + r * rb + next * row_bytes + c * (kQ4X16Chunk / 2));
    }
    if (*s % 16 == 0) {
      HWY_UNROLL(4)
      for (size_t r = 0; r < kN; ++r) PrefetchDecodeLine(scales + r * rg + next * groups + *s);
    }
    const __m256 lane_scales = _mm256_loadu_ps(xr.lane_scales + 8 * c);
    HWY_UNROLL(4)
    for (size_t r = 0; r < kN; ++r) {
      const uint8_t* wc = w + r * rb + c * (kQ4X16Chunk / 2);
      const __m256i d = Q4X16ChunkDot(wc, xr.words + c * kQ4X16Chunk);
      // float(d)·s_g first: its magnitude stays near Σ q·|h|·s_g whatever the size of x.
      const __m256 dg = _mm256_mul_ps(_mm256_cvtepi32_ps(d), ChunkScales256<kScales>(scales + r * rg + *s));
      acc[r] = _mm256_fmadd_ps(dg, lane_scales, acc[r]);
    }
  }
  HWY_UNROLL(4)
  for (size_t r = 0; r < kN; ++r) {
    out[r] = Q4X16RowDot(acc[r], x, w + r * rb, scales + r * rg, offsets ? offsets + r * rg : nullptr,
                         xr.group_sums, K, G);
  }
}

// y[r, n_begin..n_end) for the R < 4 rows of x: tiles of 4 weight rows, rows under 4 KB one per
// page (ForEachDecodeTile, decode_row_order.h), then single rows. Scratch: at least K + K/G
// floats (per x row: K/2 of words, K/8 of lane scales, K/G group sums).
template <size_t kScales>
HWY_INLINE void Q4X16Rows(const float* x, const uint8_t* w, const float* scales, const float* offsets,
                          const float* bias, float* y, size_t R, size_t K, size_t N, size_t G, size_t n_begin,
                          size_t n_end, float* scratch) {
  constexpr size_t kN = 4;
  const size_t groups = K / G, row_bytes = K / 2;
  const Q4X16Row xr{reinterpret_cast<int16_t*>(scratch), scratch + K / 2, scratch + K / 2 + K / 8};
  for (size_t r = 0; r < R; ++r) {
    const float* xrow = x + r * K;
    RoundXTo16Bits(xrow, K, G, xr);
    const auto tile = [&](auto rows_tag, size_t c, size_t stride, size_t next) {
      constexpr size_t kRows = decltype(rows_tag)::value;
      float dots[kRows];
      Q4X16Tile<kScales, kRows>(xrow, xr, w + c * row_bytes, scales + c * groups,
                                offsets ? offsets + c * groups : nullptr, K, G, stride, next, dots);
      for (size_t j = 0; j < kRows; ++j) {
        const size_t n = c + j * stride;
        y[r * N + n] = bias ? dots[j] + bias[n] : dots[j];
      }
    };
    ForEachDecodeTile<kN>(n_begin, n_end, DecodeRowSpread(row_bytes), tile);
  }
}

HWY_NOINLINE void Q4X16Columns(const float* x, const uint8_t* w, const float* scales, const float* offsets,
                               const float* bias, float* y, size_t R, size_t K, size_t N, size_t G,
                               size_t n_begin, size_t n_end, float* scratch) {
  if (G == 32) return Q4X16Rows<2>(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end, scratch);
  Q4X16Rows<1>(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end, scratch);
}

#endif  // HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_MATMUL_Q4_X16_INL_H_
