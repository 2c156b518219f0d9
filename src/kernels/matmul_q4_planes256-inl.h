// Highway-target body of the weight-only int4 decode product (R < 4 rows of x) on AVX2 CPUs
// without VNNI (Zen 1–3, Intel before Ice Lake / Alder Lake): the nibble-planes kernel of
// matmul_q4_planes-inl.h at 256 bits, used by MatMulQ4Columns (matmul_q-inl.h) where it applies.
//
// Why: the generic decode tile (Q4RowTile) widens 8 bytes to int32 lanes, masks and shifts out
// both nibbles, converts each to f32 and dequantizes it with an FMA before the FMA with x: on
// Zen 2 it ran the 1B int4 decode at 17.3 tok/s, 31.5% of the DRAM bound and slower than the int8
// artifact (20.9), compute-bound at ~2.9 weights per cycle (BM_MatMulQ4G32 with its 2 MB of
// weights in cache as fast as the decode walk from DRAM; docs/benchmarks.md, thirty-sixth session).
//
// How: a 32-byte load is one chunk of 64 weights (two Q4 blocks). Its 16-bit words are
// interleaved with the word 0x4F00 (`vpunpcklwd` / `vpunpckhwd`: words 0-3 and 4-7 of each 128-bit
// half), so each dword is 16 bits of codes under the high half 0x4F00 (an f32 exponent field of
// 158 = 0b10011110). Nibble m of a dword becomes f32 q − 8 in two ops, no convert and no multiply:
// a mask keeps the nibble and the exponent field 150 − 4m (whose bits 158 holds), which leaves
// the float 2^(23−4m) + q, and an add subtracts 2^(23−4m) + 8, exactly. The group scale is
// applied once per chunk to the sum of the 8 planes' products (the identity of
// matmul_q4_planes-inl.h):
//   Σ_k ŵ_k·x_k = Σ_g s_g · Σ_{k∈g} (q_k − 8)·x_k  +  Σ_g (o_g + 8·s_g) · Σ_{k∈g} x_k
// x is permuted once per call into the planes' lane order (PermuteToPlanes256). Every product is
// the f32 product of x with the exact q − 8 (no scaling of x or of the codes), so tiny, huge and
// non-finite x behave as in the f32 reference.
//
// Why the op count matters: on Zen 2 this loop issues ~2.4 vector ops per cycle (its four FP
// pipes take ~3.6 per cycle of the same instruction mix without the dependencies), so it runs
// at the speed of its op count per chunk and row and of the two pipes that multiply: from 31
// ops, 15 of them FMAs or multiplies, to 29 with 9: ~12.8 → ~10.9 cycles (3.35 GHz; in L2).
//
// Measured on Zen 2: thirty-sixth session (docs/benchmarks.md), against the generic tile:
// `BM_MatMulQ4G32/1/2048/2048` (one thread) 19.5 → 27.0 GFLOP/s, the 1B decode walk on 2 threads
// (`BM_DecodeLayersQ4G32/2`) 11.3 → 16.0 GB/s, 1B int4 decode 17.2 → 23.9 tok/s. Thirty-eighth
// session, each step alternated with the one before (3 repetitions, 2 rounds): the conversion as
// an add instead of an FMA by 16^−m (one exponent per plane instead of 2^23 for all)
// `BM_MatMulQ4G32/1/2048/512` 8.0–8.4 → 8.9 GB/s of weights, walk 16.0 → 17.0–17.2 GB/s; the
// words interleaved with 0x4F00 instead of a shift and two `vpblendw` 8.9 → 9.3–9.5, walk 17.1 →
// 17.6–18.1; the G = 32 scale pair as `vbroadcastsd` + in-lane `vpermilps` instead of a
// cross-lane `vpermps` (two ops on Zen 2) 9.3–9.5 → 9.8–10.0, walk 17.6–18.1 → 18.9–19.1; 1B int4
// decode 23.7–23.9 → 27.0–28.1 tok/s. Tried on the way (thirty-sixth session): the codes as signed
// fields (XOR 0x88, shift up and arithmetic shift down, convert: 15 shifts per chunk) 23.0
// GFLOP/s; masks and converts (8 converts per chunk) 26.0; the codes unpacked byte → word → dword
// under a 0x4B00 high word and one add 26.0–26.1 against 27.0; four product chains instead of
// two, 2 or 8 rows per tile instead of 4: no better (2 rows again in the thirty-eighth: within 2%).
// Thirty-eighth: the scale pair as two `vbroadcastss` and a `vinsertf128` was slower (8.7 against
// 8.9); x split into three int8 parts and multiplied with `vpmaddubsw` (the split-x method of the
// VNNI bodies, block sums over 4 rows by `vphaddw`) ran a throwaway loop in L1 at ~9.9 cycles per
// chunk and row against ~11–13 for this kernel: not worth a third body.

#if defined(SLM_KERNELS_MATMUL_Q4_PLANES256_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_MATMUL_Q4_PLANES256_INL_H_
#undef SLM_KERNELS_MATMUL_Q4_PLANES256_INL_H_
#else
#define SLM_KERNELS_MATMUL_Q4_PLANES256_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/decode_prefetch.h"
#include "kernels/vnni_intrinsics.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

// Weights per 32-byte chunk.
constexpr size_t kQ4Chunk256 = 64;

// True where the kernel applies: K holds at least one chunk and a group never straddles a chunk's
// scale vector (G divides 64 or 64 divides G).
HWY_INLINE bool Q4Planes256Apply(size_t K, size_t G) {
  return K >= kQ4Chunk256 && (kQ4Chunk256 % G == 0 || G % kQ4Chunk256 == 0);
}

// xp[c·64 + 8·P + i] = x[c·64 + 32·(i/4) + 2·(i%4) + 8·(P/4) + (P%4)/2 + 16·(P%2)] for the K/64
// whole chunks: the weight that lane i of plane P holds (ChunkDot256).
HWY_INLINE void PermuteToPlanes256(const float* HWY_RESTRICT x, float* HWY_RESTRICT xp, size_t chunks) {
  for (size_t c = 0; c < chunks; ++c) {
    const float* xc = x + c * kQ4Chunk256;
    float* out = xp + c * kQ4Chunk256;
    for (size_t P = 0; P < 8; ++P) {
      const size_t at = 8 * (P / 4) + (P % 4) / 2 + 16 * (P % 2);
      for (size_t i = 0; i < 8; ++i) out[8 * P + i] = xc[32 * (i / 4) + 2 * (i % 4) + at];
    }
  }
}

// The group scales of one chunk as a lane vector (lanes 4b..4b+3 belong to block b): kScales = 2
// for G = 32 (the pair broadcast, then an in-lane permute), else 1.
template <size_t kScales>
HWY_INLINE __m256 ChunkScales256(const float* first) {
  if constexpr (kScales == 2) {
    const __m256i lanes = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    const __m256 pair = _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(first)));
    return _mm256_permutevar_ps(pair, lanes);
  } else {
    return _mm256_broadcast_ss(first);
  }
}

// Nibble m (< 4) of every dword lane of m16 (codes in the low half, 0x4F00 in the high half) as
// f32 q − 8: masking all but nibble m and the exponent field 150 − 4m (a subset of 158's bits)
// leaves the float 2^(23−4m)·(1 + q·16^m·2^−23) = 2^(23−4m) + q, and subtracting 2^(23−4m) + 8
// is exact (both are integers below 2^24).
template <int m>
HWY_INLINE __m256 Nibble256(__m256i m16) {
  constexpr uint32_t kExponentField = 150 - 4 * m;
  const __m256 f = _mm256_castsi256_ps(_mm256_and_si256(m16, _mm256_set1_epi32(int(kExponentField << 23 | 0xFu << (4 * m)))));
  return _mm256_add_ps(f, _mm256_set1_ps(-(float(1 << (23 - 4 * m)) + 8.0f)));
}

// Σ over the 8 planes of one chunk of one weight row: (q − 8) times xp (plane P at xc + 8·P),
// two chains of 4. Planes 0-3 are nibbles 0-3 of words 0-3 of each 128-bit half, planes 4-7 of
// words 4-7.
HWY_INLINE __m256 ChunkDot256(const uint8_t* HWY_RESTRICT wc, const float* HWY_RESTRICT xc) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wc));
  const __m256i magic = _mm256_set1_epi16(0x4F00);
  const __m256i lo = _mm256_unpacklo_epi16(v, magic), hi = _mm256_unpackhi_epi16(v, magic);
  __m256 even = _mm256_mul_ps(Nibble256<0>(lo), _mm256_loadu_ps(xc));
  __m256 odd = _mm256_mul_ps(Nibble256<1>(lo), _mm256_loadu_ps(xc + 8));
  even = _mm256_fmadd_ps(Nibble256<2>(lo), _mm256_loadu_ps(xc + 16), even);
  odd = _mm256_fmadd_ps(Nibble256<3>(lo), _mm256_loadu_ps(xc + 24), odd);
  even = _mm256_fmadd_ps(Nibble256<0>(hi), _mm256_loadu_ps(xc + 32), even);
  odd = _mm256_fmadd_ps(Nibble256<1>(hi), _mm256_loadu_ps(xc + 40), odd);
  even = _mm256_fmadd_ps(Nibble256<2>(hi), _mm256_loadu_ps(xc + 48), even);
  odd = _mm256_fmadd_ps(Nibble256<3>(hi), _mm256_loadu_ps(xc + 56), odd);
  return _mm256_add_ps(even, odd);
}

// xg[g] = Σ_{k∈g} x_k for the `groups` groups of G (a multiple of 32) weights.
HWY_INLINE void Q4GroupSums256(const float* x, float* xg, size_t groups, size_t G) {
  for (size_t g = 0; g < groups; ++g) {
    __m256 sum = _mm256_setzero_ps();
    for (size_t k = g * G; k < (g + 1) * G; k += 8) sum = _mm256_add_ps(sum, _mm256_loadu_ps(x + k));
    xg[g] = vnni::ReduceAdd256(sum);
  }
}

// The end of one weight row: the offsets term of asymmetric groups (offsets_row null when
// symmetric), the lane sum, and the blocks past the whole chunks.
HWY_INLINE float Q4RowDot256(__m256 acc, const float* x, const uint8_t* w_row, const float* scales_row,
                             const float* offsets_row, const float* xg, size_t K, size_t G) {
  const size_t groups = K / G;
  if (offsets_row) {
    const __m256 eight = _mm256_set1_ps(8.0f);
    size_t g = 0;
    for (; g + 8 <= groups; g += 8) {
      const __m256 o = _mm256_fmadd_ps(eight, _mm256_loadu_ps(scales_row + g), _mm256_loadu_ps(offsets_row + g));
      acc = _mm256_fmadd_ps(o, _mm256_loadu_ps(xg + g), acc);
    }
    float rest = 0.0f;
    for (; g < groups; ++g) rest += (offsets_row[g] + 8.0f * scales_row[g]) * xg[g];
    acc = _mm256_add_ps(acc, _mm256_setr_ps(rest, 0, 0, 0, 0, 0, 0, 0));
  }
  return vnni::ReduceAdd256(acc) + vnni::Q4TailBlocks(x, w_row, scales_row, K / kQ4Chunk256 * kQ4Chunk256, K, G);
}

// out[0..kN) = the dots of one permuted x row with kN weight rows streamed together, each step
// prefetching the same line of the next tile's rows (rows are contiguous: kN rows ahead) and,
// once per line, the next tile's scales.
template <size_t kScales, size_t kN>
HWY_INLINE void Q4Planes256Tile(const float* HWY_RESTRICT x, const float* HWY_RESTRICT xp,
                                const float* HWY_RESTRICT xg, const uint8_t* HWY_RESTRICT w,
                                const float* scales, const float* offsets, size_t K, size_t G,
                                float* out) {
  const size_t row_bytes = K / 2, groups = K / G, chunks = K / kQ4Chunk256;
  __m256 acc[kN];
  HWY_UNROLL(4)
  for (size_t r = 0; r < kN; ++r) acc[r] = _mm256_setzero_ps();
  vnni::Q4ChunkScaleIndex<kScales> s(G, kQ4Chunk256);  // this chunk's first scale index
  for (size_t c = 0; c < chunks; ++c, s.Next()) {
    HWY_UNROLL(4)
    for (size_t r = 0; r < kN; ++r) {
      const uint8_t* wc = w + r * row_bytes + c * (kQ4Chunk256 / 2);
      if (c % 2 == 0) PrefetchDecodeLine(wc + kN * row_bytes);  // one prefetch per 64-byte line
      if (*s % 16 == 0) PrefetchDecodeLine(scales + (r + kN) * groups + *s);
      acc[r] = _mm256_fmadd_ps(ChunkScales256<kScales>(scales + r * groups + *s),
                               ChunkDot256(wc, xp + c * kQ4Chunk256), acc[r]);
    }
  }
  for (size_t r = 0; r < kN; ++r) {
    out[r] = Q4RowDot256(acc[r], x, w + r * row_bytes, scales + r * groups,
                         offsets ? offsets + r * groups : nullptr, xg, K, G);
  }
}

// y[r, n_begin..n_end) for the R < 4 rows of x, kN weight rows at a time. Scratch: per x row, K
// floats of permuted x and K/G group sums (only for asymmetric weights).
template <size_t kScales>
HWY_INLINE void Q4Planes256Rows(const float* x, const uint8_t* w, const float* scales,
                                const float* offsets, const float* bias, float* y, size_t R, size_t K,
                                size_t N, size_t G, size_t n_begin, size_t n_end, float* scratch) {
  constexpr size_t kN = 4;
  const size_t groups = K / G, row_bytes = K / 2;
  float* xp = scratch;
  float* xg = scratch + K;
  for (size_t r = 0; r < R; ++r) {
    const float* xr = x + r * K;
    PermuteToPlanes256(xr, xp, K / kQ4Chunk256);
    if (offsets) Q4GroupSums256(xr, xg, groups, G);
    float dots[kN];
    size_t c = n_begin;
    for (; c + kN <= n_end; c += kN) {
      Q4Planes256Tile<kScales, kN>(xr, xp, xg, w + c * row_bytes, scales + c * groups,
                                   offsets ? offsets + c * groups : nullptr, K, G, dots);
      for (size_t j = 0; j < kN; ++j) y[r * N + c + j] = bias ? dots[j] + bias[c + j] : dots[j];
    }
    for (; c < n_end; ++c) {
      Q4Planes256Tile<kScales, 1>(xr, xp, xg, w + c * row_bytes, scales + c * groups,
                                  offsets ? offsets + c * groups : nullptr, K, G, dots);
      y[r * N + c] = bias ? dots[0] + bias[c] : dots[0];
    }
  }
}

HWY_NOINLINE void Q4Planes256Columns(const float* x, const uint8_t* w, const float* scales,
                                     const float* offsets, const float* bias, float* y, size_t R,
                                     size_t K, size_t N, size_t G, size_t n_begin, size_t n_end,
                                     float* scratch) {
  if (G == 32) return Q4Planes256Rows<2>(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end, scratch);
  Q4Planes256Rows<1>(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end, scratch);
}

#endif  // HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_MATMUL_Q4_PLANES256_INL_H_
