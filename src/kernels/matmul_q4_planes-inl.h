// Highway-target body of the weight-only int4 decode product (R < 4 rows of x) on AVX-512: the
// "nibble planes" kernel, used by MatMulQ4Columns (matmul_q-inl.h) where it applies.
//
// Why: the generic decode tile widens 16 packed bytes to int32 lanes, masks and shifts out both
// nibbles, converts each to f32 and applies scale and offset with an FMA before the FMA with x:
// 9 vector ops per 32 weights plus per-group scalar loads and broadcasts. At group 32 that made
// int4 decode compute-bound at ~26 G weights/s per core (the same speed with the weights in L3
// as in DRAM), below the memory bound.
//
// How: a 64-byte load is one chunk of 128 weights (4 Q4 blocks). Its dword lane i holds 8
// nibbles; nibble m of every lane is brought to the low bits by one shift and turned into the
// float q − 8 by one `vpermps` from a 16-entry table (vpermps reads only the low 4 bits of each
// index, so no mask is needed): 2 ops per 16 weights instead of 4, and no dequantizing FMA,
// because the group scale is applied once per chunk to the sum of the 8 products:
//   Σ_k ŵ_k·x_k = Σ_g s_g · Σ_{k∈g} (q_k − 8)·x_k  +  Σ_g (o_g + 8·s_g) · Σ_{k∈g} x_k
// (ŵ = q·s + o; symmetric groups have o = −8·s, so their second term is zero). Lane i of plane m
// holds weight 32·(i/4) + 4·(i%4) + m/2 + 16·(m%2) of the chunk (the Q4 block layout of
// quant_kernels.h), so x is permuted once per call into the same order (vnni::PermuteToPlanes;
// CPUs with AVX-512 VNNI run matmul_q4_split_x.cc instead); lanes 4b..4b+3 all belong to block b,
// so the scales of a chunk form one vector too.

#if defined(SLM_KERNELS_MATMUL_Q4_PLANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_MATMUL_Q4_PLANES_INL_H_
#undef SLM_KERNELS_MATMUL_Q4_PLANES_INL_H_
#else
#define SLM_KERNELS_MATMUL_Q4_PLANES_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/decode_prefetch.h"
#include "kernels/vnni_intrinsics.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3

using vnni::kQ4PlaneChunk;
using vnni::Q4PlanesApply;

// Σ over the 8 planes of one chunk of one weight row: (q − 8) from the table, times xp. Two
// chains of 4 FMAs.
HWY_INLINE __m512 ChunkDot(const uint8_t* HWY_RESTRICT wc, const float* HWY_RESTRICT xc, __m512 table) {
  const __m512i v = _mm512_loadu_si512(wc);
  __m512 even = _mm512_mul_ps(_mm512_permutexvar_ps(v, table), _mm512_loadu_ps(xc));
  __m512 odd = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table), _mm512_loadu_ps(xc + 16));
  even = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 8), table), _mm512_loadu_ps(xc + 32), even);
  odd = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 12), table), _mm512_loadu_ps(xc + 48), odd);
  even = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 16), table), _mm512_loadu_ps(xc + 64), even);
  odd = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 20), table), _mm512_loadu_ps(xc + 80), odd);
  even = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 24), table), _mm512_loadu_ps(xc + 96), even);
  odd = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 28), table), _mm512_loadu_ps(xc + 112), odd);
  return _mm512_add_ps(even, odd);
}

// out[0..kN) = the dots of one permuted x row with kN weight rows streamed together, each step
// prefetching the same chunk of the next tile's rows (rows are contiguous: kN rows ahead) and,
// once per line, the next tile's scales (unprefetched, the scale streams held the kernel to
// 11–13 GB/s from DRAM on one thread; 15.3–15.7 with them, 1×8192×16384, A/B in one run). Four
// interleaved rows decoded the 1B int4 artifact 1.3–1.6× faster than rows walked one at a time
// with a 4-row-ahead prefetch (A/B in one run, 3 of 3 rounds; an earlier set of rounds on a
// slower phase of this VM had favoured single rows by 3–26%).
template <size_t kScales, size_t kN>
HWY_INLINE void Q4PlanesTile(const float* HWY_RESTRICT x, const float* HWY_RESTRICT xp,
                             const float* HWY_RESTRICT xg, const uint8_t* HWY_RESTRICT w,
                             const float* scales, const float* offsets, size_t K, size_t G,
                             float* out) {
  const __m512 table = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  const size_t row_bytes = K / 2, groups = K / G, chunks = K / kQ4PlaneChunk;
  __m512 acc[kN];
  HWY_UNROLL(4)
  for (size_t r = 0; r < kN; ++r) acc[r] = _mm512_setzero_ps();
  vnni::Q4ChunkScaleIndex<kScales> s(G);  // this chunk's first scale index
  for (size_t c = 0; c < chunks; ++c, s.Next()) {
    HWY_UNROLL(4)
    for (size_t r = 0; r < kN; ++r) {
      const uint8_t* wc = w + r * row_bytes + c * (kQ4PlaneChunk / 2);
      PrefetchDecodeLine(wc + kN * row_bytes);
      if (*s % 16 == 0) {  // a new line of the next tile's scales (a second stream per row)
        PrefetchDecodeLine(scales + (r + kN) * groups + *s);
      }
      acc[r] = _mm512_fmadd_ps(vnni::Q4ChunkScales<kScales>(scales + r * groups + *s),
                               ChunkDot(wc, xp + c * kQ4PlaneChunk, table), acc[r]);
    }
  }
  for (size_t r = 0; r < kN; ++r) {
    out[r] = vnni::Q4RowDot(acc[r], x, w + r * row_bytes, scales + r * groups,
                            offsets ? offsets + r * groups : nullptr, xg, K, G);
  }
}

// y[r, n_begin..n_end) for the R < 4 rows of x, 4 weight rows at a time. Scratch: per x row, K
// floats of permuted x and K/G group sums (only for asymmetric weights).
template <size_t kScales>
HWY_INLINE void Q4PlanesRows(const float* x, const uint8_t* w, const float* scales,
                             const float* offsets, const float* bias, float* y, size_t R, size_t K,
                             size_t N, size_t G, size_t n_begin, size_t n_end, float* scratch) {
  constexpr size_t kN = 4;
  const size_t groups = K / G, row_bytes = K / 2;
  float* xp = scratch;
  float* xg = scratch + K;
  for (size_t r = 0; r < R; ++r) {
    const float* xr = x + r * K;
    vnni::PermuteToPlanes(xr, xp, K / kQ4PlaneChunk);
    if (offsets) vnni::Q4GroupSums(xr, xg, groups, G);
    float dots[kN];
    size_t c = n_begin;
    for (; c + kN <= n_end; c += kN) {
      Q4PlanesTile<kScales, kN>(xr, xp, xg, w + c * row_bytes, scales + c * groups,
                                offsets ? offsets + c * groups : nullptr, K, G, dots);
      for (size_t j = 0; j < kN; ++j) y[r * N + c + j] = bias ? dots[j] + bias[c + j] : dots[j];
    }
    for (; c < n_end; ++c) {
      Q4PlanesTile<kScales, 1>(xr, xp, xg, w + c * row_bytes, scales + c * groups,
                               offsets ? offsets + c * groups : nullptr, K, G, dots);
      y[r * N + c] = bias ? dots[0] + bias[c] : dots[0];
    }
  }
}

HWY_NOINLINE void Q4PlanesColumns(const float* x, const uint8_t* w, const float* scales,
                                  const float* offsets, const float* bias, float* y, size_t R,
                                  size_t K, size_t N, size_t G, size_t n_begin, size_t n_end,
                                  float* scratch) {
  switch (kQ4PlaneChunk / G) {
    case 4: return Q4PlanesRows<4>(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end, scratch);
    case 2: return Q4PlanesRows<2>(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end, scratch);
    default: return Q4PlanesRows<1>(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end, scratch);
  }
}

#endif  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_MATMUL_Q4_PLANES_INL_H_
