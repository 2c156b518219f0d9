// AVX-512 VNNI bodies of the dynamic-activation quantized products (8da8w, 8da4w): the tiles
// below for decode and short chunks, the panel GEMMs of matmul_q_vnni_panel.cc from
// kVnniPanelRows rows on.
//
// Why not Highway: the Debian 12 Highway (1.0.3) has no op for u8×s8 → i32 dot products, and its
// AVX3_DL target does not enable avx512vnni. These two functions are therefore written with
// intrinsics in a function-level target, chosen at run time by quant_kernels' dispatch when the
// CPU has avx512vnni (VnniAvailable), and tested against the same scalar references as the
// Highway bodies. AVX-VNNI CPUs without AVX-512 run the same tiles and panels at 256 bits
// (matmul_q_avxvnni*.cc); everywhere else (AVX2, Arm, old x86) the Highway bodies run.
//
// vpdpbusd multiplies unsigned bytes by signed bytes, 64 products per instruction summed in
// groups of 4 into 16 int32 lanes:
//  - Q4: the weight nibbles (0..15) are the unsigned operand, xq the signed one; exact.
//  - Q8: w + 128 (unsigned) times xq (signed), minus 128·Σxq per activation row; exact.
// Q4 packing (quant_kernels.h): 32 bytes hold 64 consecutive k as two 32-k blocks, block b's
// byte j = q[32b + j] (low nibble) | q[32b + 16 + j] << 4. The decode tiles read 64 bytes (128 k,
// 4 blocks) at a time: int32 lane i holds bytes 4i..4i+3 of block i/4, whose low nibbles are
// q[32b + 4(i%4) + 0..3] and high nibbles q[32b + 16 + 4(i%4) + 0..3], so one vpdpbusd of the low
// nibbles and one of the high nibbles, against the matching permutation of xq, add 8 products of
// one block into each lane (see PermuteForQ4Chunks).
#include "kernels/matmul_q_vnni.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu_feature.h"
#include "kernels/decode_prefetch.h"
#include "kernels/matmul_q_amx.h"
#include "kernels/vnni_intrinsics.h"

namespace slm::kernels {

namespace {
bool CpuHasAvx512Vnni() {
#if SLM_HAVE_VNNI_KERNELS
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}
CpuFeature avx512_vnni(CpuHasAvx512Vnni, "SLM_DISABLE_VNNI");
}  // namespace

bool VnniAvailable() { return avx512_vnni.Available(); }
void SetVnniEnabledForTest(bool enabled) { avx512_vnni.SetEnabledForTest(enabled); }

#if SLM_HAVE_VNNI_KERNELS

namespace {
using vnni::Dpbusd;
using vnni::ReduceAdd;
using vnni::ThreadScratch;

// a·b + c fused, on 4 lanes (the AVX-512VL form: these functions' target has no "fma").
SLM_VNNI_TARGET inline __m128 Fma4(__m128 a, __m128 b, __m128 c) { return _mm_mask_fmadd_ps(a, 0xF, b, c); }

// ---- Q8 × dynamic int8 ----

// xsum[r] = Σ_k xq[r, k]: the correction for the weights' +128 bias below.
SLM_VNNI_TARGET void RowSums(const int8_t* xq, int32_t* xsum, size_t R, size_t K) {
  const __m512i ones = _mm512_set1_epi8(1);
  for (size_t r = 0; r < R; ++r) {
    __m512i acc = _mm512_setzero_si512();
    for (size_t k = 0; k < K; k += 64) acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512(xq + r * K + k));
    xsum[r] = ReduceAdd(acc);
  }
}

// kR rows × kN weight rows; K % 64 == 0. The weights become the unsigned operand (w + 128, one
// XOR per loaded vector) and xq the signed one, so Σ w·x = Σ (w + 128)·x − 128·Σx with Σx per
// row computed once per call: no per-tile weight sums, and kR·kN + kN + 2 live vectors (22 for
// 4×4) fit the 32 zmm registers without spills.
template <int kR, int kN>
SLM_VNNI_TARGET inline void Q8Tile(const int8_t* xq, const float* xscale, const int32_t* xsum,
                                   const int8_t* w, const float* scales, const float* bias,
                                   float* y, size_t K, size_t ldy) {
  __m512i acc[kR][kN];
  const __m512i flip = _mm512_set1_epi8(int8_t(0x80));
  #pragma GCC unroll 16
  for (int r = 0; r < kR; ++r)
    #pragma GCC unroll 16
    for (int c = 0; c < kN; ++c) acc[r][c] = _mm512_setzero_si512();
  for (size_t k = 0; k < K; k += 64) {
    __m512i wv[kN];
    #pragma GCC unroll 16
    for (int c = 0; c < kN; ++c) {
      // The next tile's row c at this k, or 1 KB ahead along rows longer than that
      // (decode_prefetch.h). For decode, where every weight is read once, prefetching gave 7–50%
      // more 8da8w tok/s than none (A/B in one run).
      PrefetchDecodeLine(DecodePrefetchAddress(w + c * K + k, k, K, kN));
      wv[c] = _mm512_xor_si512(_mm512_loadu_si512(w + c * K + k), flip);
    }
    #pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) {
      const __m512i xv = _mm512_loadu_si512(xq + r * K + k);
      #pragma GCC unroll 16
      for (int c = 0; c < kN; ++c) acc[r][c] = Dpbusd(acc[r][c], wv[c], xv);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
    #pragma GCC unroll 16
    for (int c = 0; c < kN; ++c) {
      // fma(float(dot)·xscale, scale, bias or 0), explicitly fused: the panel GEMM forms its
      // outputs the same way (prefill and decode give the same bits).
      const int32_t dot = ReduceAdd(acc[r][c]) - 128 * xsum[r];
      const __m128 v = Fma4(_mm_set_ss(float(dot) * xscale[r]), _mm_set_ss(scales[c]), _mm_set_ss(bias ? bias[c] : 0.0f));
      y[r * ldy + c] = _mm_cvtss_f32(v);
    }
  }
}

// Decode (R < 4): one row of xq × kN weight rows in 32-byte steps, kN = 8 (1 at the edge);
// K % 64 == 0; the same int32 dots, hence the same output bits, as Q8Tile. Why not Q8Tile<1, 4>:
// from memory it streamed the weights slower than the f32-converting int8 weight-only tile, though
// in L2 it was the faster one. In a 1B-shaped walk (16 layers × 7 int8 products, x quantized
// once per product, 2 threads; docs/benchmarks.md, thirtieth session) this tile read 1.31× the
// bytes/s of Q8Tile<1, 4> (15 rounds in rotated order); 64-byte steps over 8 rows gave
// 1.05–1.13×, 32-byte steps over 4 rows 0.94–1.05× (12 rounds, fixed order): more weight rows
// are more memory streams at once. Each row prefetches once per 64-byte line, as Q8Tile does
// (decode_prefetch.h): 1B 8da8w decode 4 of 4 alternated rounds faster than prefetching every
// 32-byte step.
template <int kN>
SLM_VNNI_TARGET inline void Q8RowTile256(const int8_t* xq, float xscale, int32_t xsum, const int8_t* w,
                                         const float* scales, const float* bias, float* y, size_t K) {
  __m256i acc[kN];
  const __m256i flip = _mm256_set1_epi8(int8_t(0x80));
  #pragma GCC unroll 8
  for (int c = 0; c < kN; ++c) acc[c] = _mm256_setzero_si256();
  for (size_t k = 0; k < K; k += 64) {
    const int8_t* wk = w + k;
    const int8_t* ahead = wk + DecodePrefetchDistance(k, K, kN);  // the same for every row
    #pragma GCC unroll 8
    for (int c = 0; c < kN; ++c) PrefetchDecodeLine(ahead + c * K);
    #pragma GCC unroll 2
    for (size_t half = 0; half < 64; half += 32) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + k + half));
      #pragma GCC unroll 8
      for (int c = 0; c < kN; ++c) {
        const __m256i wv = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk + c * K + half)), flip);
        acc[c] = Dpbusd(acc[c], wv, xv);
      }
    }
  }
  #pragma GCC unroll 8
  for (int c = 0; c < kN; ++c) {  // formed as Q8Tile forms them
    const int32_t dot = ReduceAdd(acc[c]) - 128 * xsum;
    const __m128 v = Fma4(_mm_set_ss(float(dot) * xscale), _mm_set_ss(scales[c]), _mm_set_ss(bias ? bias[c] : 0.0f));
    y[c] = _mm_cvtss_f32(v);
  }
}

// ---- Q4 × dynamic int8 ----

// out = each row of xq [R, K] in the order of the nibbles of Q4Tile's weight loads: per 128-k
// chunk, 64 "low" bytes (k 0-15, 32-47, 64-79, 96-111: the 16-byte pieces 0, 2, 4, 6) then 64
// "high" bytes (pieces 1, 3, 5, 7); a 64-k tail (K % 128) as 32 low bytes (pieces 0, 2) then 32
// high bytes (1, 3).
SLM_VNNI_TARGET void PermuteForQ4Chunks(const int8_t* xq, int8_t* out, size_t R, size_t K) {
  const size_t whole = K / 128 * 128;
  for (size_t r = 0; r < R; ++r) {
    const int8_t* x = xq + r * K;
    int8_t* o = out + r * K;
    for (size_t k = 0; k < whole; k += 128) {
      const __m512i a = _mm512_loadu_si512(x + k), b = _mm512_loadu_si512(x + k + 64);
      _mm512_storeu_si512(o + k, _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_storeu_si512(o + k + 64, _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    }
    if (whole < K) {
      const __m512i a = _mm512_loadu_si512(x + whole);
      _mm512_storeu_si512(o + whole, _mm512_shuffle_i64x2(a, a, _MM_SHUFFLE(3, 1, 2, 0)));
    }
  }
}

// Per 128-bit block b of the four vectors: [Σ v0, Σ v1, Σ v2, Σ v3] over the block's 4 lanes.
SLM_VNNI_TARGET inline __m512i BlockSums4(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
  const __m512i a01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
  const __m512i a23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a01, a23), _mm512_unpackhi_epi64(a01, a23));
}

template <int kBlock>
SLM_VNNI_TARGET inline __m128i Block(__m512i v) {
  return _mm512_extracti32x4_epi32(v, kBlock);
}

// kR rows × kN weight rows (4 × 4, 4 × 1, 1 × 8, 1 × 4, 1 × 1); K % 64 == 0, G = 32, 64 or a
// multiple of 128. xp:
// xq permuted by PermuteForQ4Chunks; gst: the rows' group sums, [groups][4] (lane r = row r)
// when kR = 4, else [groups] of the one row. The outputs are formed in the 8da4w order of
// quant_kernels.h, as the panel GEMM forms them: 4 outputs share a 128-bit accumulator (a "set":
// one per weight row with lanes = rows when kR = 4, else one with lanes = weight rows). Per
// chunk, each output's int32 lanes (lane i: 8 products of block i / 4) are reduced to per-block
// sums for 4 outputs at once (BlockSums4), combined into group dots, and each group is folded
// in order. Each weight row prefetches the same chunk of the next tile's row (kN rows ahead), as
// the int4 planes kernel.
template <int kR, int kN>
SLM_VNNI_TARGET inline void Q4Tile(const int8_t* xp, const float* xscale, const int32_t* gst,
                                   const uint8_t* w, const float* scales, const float* offsets,
                                   const float* bias, float* y, size_t K, size_t G, size_t ldy) {
  static_assert((kR == 4 && (kN == 4 || kN == 1)) || (kR == 1 && (kN == 8 || kN == 4 || kN == 1)),
                "4 rows × 4 or 1 weight rows, one row × 8, 4 or 1");
  // Sets of 4 outputs: one per weight row with lanes = rows (kR = 4), else lanes = weight rows
  // 4s..4s + 3 (two sets of 8 weight rows: two independent FMA chains for decode).
  constexpr int kSets = kR == 4 ? kN : (kN + 3) / 4;
  constexpr int kSetCols = kR == 4 ? 1 : (kN < 4 ? kN : 4);
  const size_t groups = K / G, row_bytes = K / 2, chunks = K / 128, scale_lines = (groups + 15) / 16;
  __m128 acc[kSets];
  __m512i pending[kSets];  // G >= 128: a group's block sums over its chunks
  #pragma GCC unroll 8
  for (int s = 0; s < kSets; ++s) {
    acc[s] = _mm_setzero_ps();
    pending[s] = _mm512_setzero_si512();
  }
  // acc[s] (+)= group g's dots d (lane per output of set s), in the 8da4w order.
  const auto fold = [&](int s, size_t g, __m128i d) SLM_VNNI_TARGET __attribute__((always_inline)) {
    __m128i gs;
    __m128 scale, offset = _mm_setzero_ps();
    if constexpr (kR == 4) {
      gs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gst + 4 * g));
      scale = _mm_set1_ps(scales[s * groups + g]);
      if (offsets != nullptr) offset = _mm_set1_ps(offsets[s * groups + g]);
    } else {
      gs = _mm_set1_epi32(gst[g]);
      const auto at = [&](const float* v, int j) { return j < kSetCols ? v[(4 * s + j) * groups + g] : 0.0f; };
      scale = _mm_setr_ps(at(scales, 0), at(scales, 1), at(scales, 2), at(scales, 3));
      if (offsets != nullptr) offset = _mm_setr_ps(at(offsets, 0), at(offsets, 1), at(offsets, 2), at(offsets, 3));
    }
    if (offsets == nullptr) {
      acc[s] = Fma4(_mm_cvtepi32_ps(_mm_sub_epi32(d, _mm_slli_epi32(gs, 3))), scale, acc[s]);
    } else {
      acc[s] = Fma4(_mm_cvtepi32_ps(gs), offset, Fma4(_mm_cvtepi32_ps(d), scale, acc[s]));
    }
  };
  // The decode tiles' (one row, sets of 4 weight rows) whole chunk with G = 32: the 4 groups' scales
  // (and offsets, group sums) of the 4 weight rows loaded as 4 vectors and transposed once, not
  // gathered per group.
  const auto fold_chunk_g32 = [&](int s, size_t c, __m512i M) SLM_VNNI_TARGET __attribute__((always_inline)) {
    const size_t g0 = 4 * s * groups + 4 * c;  // set s's first weight row, group 4c
    const __m512i transpose = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const auto by_group = [&](const float* v) SLM_VNNI_TARGET __attribute__((always_inline)) {
      __m512 rows = _mm512_castps128_ps512(_mm_loadu_ps(v + g0));  // block n: weight row n's 4 groups
      rows = _mm512_insertf32x4(rows, _mm_loadu_ps(v + groups + g0), 1);
      rows = _mm512_insertf32x4(rows, _mm_loadu_ps(v + 2 * groups + g0), 2);
      rows = _mm512_insertf32x4(rows, _mm_loadu_ps(v + 3 * groups + g0), 3);
      return _mm512_permutexvar_ps(transpose, rows);  // block b: the 4 weight rows' group g0 + b
    };
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i gs = _mm512_permutexvar_epi32(spread, _mm512_castsi128_si512(
                                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(gst + 4 * c))));
    const __m512 S = by_group(scales);
    if (offsets == nullptr) {
      const __m512 D = _mm512_cvtepi32_ps(_mm512_sub_epi32(M, _mm512_slli_epi32(gs, 3)));
      acc[s] = Fma4(_mm512_castps512_ps128(D), _mm512_castps512_ps128(S), acc[s]);
      acc[s] = Fma4(_mm512_extractf32x4_ps(D, 1), _mm512_extractf32x4_ps(S, 1), acc[s]);
      acc[s] = Fma4(_mm512_extractf32x4_ps(D, 2), _mm512_extractf32x4_ps(S, 2), acc[s]);
      acc[s] = Fma4(_mm512_extractf32x4_ps(D, 3), _mm512_extractf32x4_ps(S, 3), acc[s]);
    } else {
      const __m512 D = _mm512_cvtepi32_ps(M), O = by_group(offsets), GS = _mm512_cvtepi32_ps(gs);
      acc[s] = Fma4(_mm512_castps512_ps128(GS), _mm512_castps512_ps128(O),
                    Fma4(_mm512_castps512_ps128(D), _mm512_castps512_ps128(S), acc[s]));
      acc[s] = Fma4(_mm512_extractf32x4_ps(GS, 1), _mm512_extractf32x4_ps(O, 1),
                    Fma4(_mm512_extractf32x4_ps(D, 1), _mm512_extractf32x4_ps(S, 1), acc[s]));
      acc[s] = Fma4(_mm512_extractf32x4_ps(GS, 2), _mm512_extractf32x4_ps(O, 2),
                    Fma4(_mm512_extractf32x4_ps(D, 2), _mm512_extractf32x4_ps(S, 2), acc[s]));
      acc[s] = Fma4(_mm512_extractf32x4_ps(GS, 3), _mm512_extractf32x4_ps(O, 3),
                    Fma4(_mm512_extractf32x4_ps(D, 3), _mm512_extractf32x4_ps(S, 3), acc[s]));
    }
  };
  // The group dots of one chunk (nb = 4 blocks, or 2 for a 64-k tail) from its block sums M.
  const auto chunk_groups = [&](int s, size_t c, __m512i M, int nb) SLM_VNNI_TARGET __attribute__((always_inline)) {
    if (kR == 1 && kSetCols == 4 && G == 32 && nb == 4) {
      fold_chunk_g32(s, c, M);
    } else if (G == 32) {
      fold(s, 4 * c, Block<0>(M));
      fold(s, 4 * c + 1, Block<1>(M));
      if (nb == 4) {
        fold(s, 4 * c + 2, Block<2>(M));
        fold(s, 4 * c + 3, Block<3>(M));
      }
    } else if (G == 64) {
      const __m512i pairs = _mm512_add_epi32(M, _mm512_shuffle_i32x4(M, M, _MM_SHUFFLE(2, 3, 0, 1)));
      fold(s, 2 * c, Block<0>(pairs));
      if (nb == 4) fold(s, 2 * c + 1, Block<2>(pairs));
    } else {
      pending[s] = _mm512_add_epi32(pending[s], M);
      if ((c + 1) * 128 % G == 0) {
        const __m512i p = pending[s];
        const __m512i p2 = _mm512_add_epi32(p, _mm512_shuffle_i32x4(p, p, _MM_SHUFFLE(2, 3, 0, 1)));
        fold(s, (c + 1) * 128 / G - 1, Block<0>(_mm512_add_epi32(p2, _mm512_shuffle_i32x4(p2, p2, _MM_SHUFFLE(1, 0, 3, 2)))));
        pending[s] = _mm512_setzero_si512();
      }
    }
  };
  // Block sums of set s from the chunk's dots t[r][n].
  const auto set_sums = [&](int s, const __m512i (&t)[kR][kN]) SLM_VNNI_TARGET __attribute__((always_inline)) {
    const __m512i z = _mm512_setzero_si512();
    if constexpr (kR == 4) return BlockSums4(t[0][s], t[1][s], t[2][s], t[3][s]);
    else if constexpr (kSetCols == 4) return BlockSums4(t[0][4 * s], t[0][4 * s + 1], t[0][4 * s + 2], t[0][4 * s + 3]);
    else return BlockSums4(t[0][0], z, z, z);
  };
  for (size_t c = 0; c < chunks; ++c) {
    __m512i lo[kN], hi[kN];
    #pragma GCC unroll 8
    for (int n = 0; n < kN; ++n) {
      const uint8_t* wc = w + n * row_bytes + 64 * c;
      PrefetchDecodeLine(wc + kN * row_bytes);
      if (c < scale_lines) {  // and, over the first chunks, the next tile's scales (offsets)
        PrefetchDecodeLine(scales + (n + kN) * groups + 16 * c);
        if (offsets != nullptr) PrefetchDecodeLine(offsets + (n + kN) * groups + 16 * c);
      }
      vnni::LoadNibbles(wc, lo[n], hi[n]);
    }
    __m512i t[kR][kN];
    #pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) {
      const __m512i xl = _mm512_loadu_si512(xp + r * K + 128 * c);
      const __m512i xh = _mm512_loadu_si512(xp + r * K + 128 * c + 64);
      #pragma GCC unroll 8
      for (int n = 0; n < kN; ++n) t[r][n] = Dpbusd(Dpbusd(_mm512_setzero_si512(), lo[n], xl), hi[n], xh);
    }
    #pragma GCC unroll 8
    for (int s = 0; s < kSets; ++s) chunk_groups(s, c, set_sums(s, t), 4);
  }
  if (chunks * 128 < K) {  // a 64-k tail: two blocks, in 256-bit halves of the same scheme
    const size_t k0 = chunks * 128;
    const __m256i nibble256 = _mm256_set1_epi8(0x0F);
    __m512i t[kR][kN];
    #pragma GCC unroll 8
    for (int n = 0; n < kN; ++n) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + n * row_bytes + k0 / 2));
      const __m256i l = _mm256_and_si256(v, nibble256), h = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble256);
      #pragma GCC unroll 8
      for (int r = 0; r < kR; ++r) {
        const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + r * K + k0));
        const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + r * K + k0 + 32));
        const __m256i dot = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), l, xl), h, xh);
        t[r][n] = _mm512_zextsi256_si512(dot);
      }
    }
    #pragma GCC unroll 8
    for (int s = 0; s < kSets; ++s) chunk_groups(s, chunks, set_sums(s, t), 2);
  }
  // y = fma(acc, x_scale, bias or 0), per set's lanes.
  #pragma GCC unroll 8
  for (int s = 0; s < kSets; ++s) {
    alignas(16) float out[4];
    if constexpr (kR == 4) {
      const __m128 b = _mm_set1_ps(bias != nullptr ? bias[s] : 0.0f);
      _mm_store_ps(out, Fma4(acc[s], _mm_loadu_ps(xscale), b));
      for (int r = 0; r < 4; ++r) y[r * ldy + s] = out[r];
    } else {
      const auto at = [&](int j) { return bias != nullptr && j < kSetCols ? bias[4 * s + j] : 0.0f; };
      _mm_store_ps(out, Fma4(acc[s], _mm_set1_ps(xscale[0]), _mm_setr_ps(at(0), at(1), at(2), at(3))));
      for (int j = 0; j < kSetCols; ++j) y[4 * s + j] = out[j];
    }
  }
}

// Runs Tile<kR, kN> over rows [0, R) × columns [n_begin, n_end), with smaller tiles at the edges.
// Columns outside, rows inside: a tile's weight rows (kN·K bytes or half that) stay in L1 while
// every row block of x (R·K bytes, in L2) passes them, so each weight is read from memory once.
template <int kN, template <int, int> class Call, class... Args>
SLM_VNNI_TARGET void ForTiles(size_t R, size_t n_begin, size_t n_end, Args... args) {
  const size_t rows4 = R / 4 * 4;
  size_t c = n_begin;
  for (; c + kN <= n_end; c += kN) {
    for (size_t r = 0; r < rows4; r += 4) Call<4, kN>::Run(r, c, args...);
    for (size_t r = rows4; r < R; ++r) Call<1, kN>::Run(r, c, args...);
  }
  for (; c < n_end; ++c) {
    for (size_t r = 0; r < rows4; r += 4) Call<4, 1>::Run(r, c, args...);
    for (size_t r = rows4; r < R; ++r) Call<1, 1>::Run(r, c, args...);
  }
}

template <int kR, int kN>
struct Q8Call {
  SLM_VNNI_TARGET static void Run(size_t r, size_t c, const int8_t* xq, const float* xscale,
                                  const int32_t* xsum, const int8_t* w, const float* scales,
                                  const float* bias, float* y, size_t K, size_t N) {
    Q8Tile<kR, kN>(xq + r * K, xscale + r, xsum + r, w + c * K, scales + c, bias ? bias + c : nullptr,
                   y + r * N + c, K, N);
  }
};

template <int kR, int kN>
struct Q4Call {
  SLM_VNNI_TARGET static void Run(size_t r, size_t c, const int8_t* xp, const float* xscale,
                                  const int32_t* gs4, const int32_t* group_sums, const uint8_t* w,
                                  const float* scales, const float* offsets, const float* bias, float* y,
                                  size_t K, size_t N, size_t G) {
    const size_t groups = K / G;
    const int32_t* gst = kR == 4 ? gs4 + r * groups : group_sums + r * groups;  // gs4: [R / 4][groups][4]
    Q4Tile<kR, kN>(xp + r * K, xscale + r, gst, w + c * (K / 2), scales + c * groups,
                   offsets ? offsets + c * groups : nullptr, bias ? bias + c : nullptr, y + r * N + c, K, G, N);
  }
};

SLM_VNNI_TARGET double VnniDotLoopBody(int64_t iters, int32_t* sink) {
  __m512i acc[12];
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  for (int j = 0; j < 12; ++j) acc[j] = _mm512_set1_epi32(j);
  for (int64_t i = 0; i < iters; ++i) {
    #pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = Dpbusd(acc[j], a, b);
  }
  __m512i s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_epi32(s, acc[j]);
  *sink = ReduceAdd(s);
  return double(iters) * 12 * 64 * 2;
}

}  // namespace

double VnniDotLoop(int64_t iters, int32_t* sink) {
  if (!VnniAvailable()) return 0;
  return VnniDotLoopBody(iters, sink);
}

bool MatMulQ8DynColumnsVnni(const int8_t* xq, const float* xscale, const int8_t* w,
                            const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                            int64_t N, int64_t n_begin, int64_t n_end) {
  if (!VnniAvailable() || K % 64 != 0) return false;
  if (R >= kVnniPanelRows) {  // AMX where the CPU has it, for whole blocks of 16 columns
    n_begin = MatMulQ8DynPanelAmx(xq, xscale, w, scales, bias, y, R, K, N, n_begin, n_end);
    if (n_begin == n_end) return true;
  }
  const size_t k = size_t(K), rows = size_t(R);
  int32_t* xsum = reinterpret_cast<int32_t*>(ThreadScratch(rows * sizeof(int32_t)));
  RowSums(xq, xsum, rows, k);
  if (R >= kVnniPanelRows) {
    MatMulQ8DynPanelVnni(xq, xscale, xsum, w, scales, bias, y, R, K, N, n_begin, n_end);
    return true;
  }
  if (rows < 4) {  // decode
    for (size_t r = 0; r < rows; ++r) {
      const int8_t* xr = xq + r * k;
      float* yr = y + r * size_t(N);
      size_t c = size_t(n_begin);
      for (; c + 8 <= size_t(n_end); c += 8) {
        Q8RowTile256<8>(xr, xscale[r], xsum[r], w + c * k, scales + c, bias ? bias + c : nullptr, yr + c, k);
      }
      for (; c < size_t(n_end); ++c) {
        Q8RowTile256<1>(xr, xscale[r], xsum[r], w + c * k, scales + c, bias ? bias + c : nullptr, yr + c, k);
      }
    }
    return true;
  }
  ForTiles<4, Q8Call>(rows, size_t(n_begin), size_t(n_end), xq, xscale, static_cast<const int32_t*>(xsum), w,
                      scales, bias, y, k, size_t(N));
  return true;
}

bool MatMulQ4DynColumnsVnni(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                            const uint8_t* w, const float* scales, const float* offsets,
                            const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                            int64_t n_begin, int64_t n_end) {
  if (!VnniAvailable() || K % 64 != 0 || (G != 32 && G % 64 != 0)) return false;
  if (R >= kVnniPanelRows) {  // AMX where the CPU has it, for whole blocks of 16 columns
    n_begin = MatMulQ4DynPanelAmx(xq, xscale, group_sums, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end);
    if (n_begin == n_end) return true;
    MatMulQ4DynPanelVnni(xq, xscale, group_sums, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end);
    return true;
  }
  // The tiles fold whole groups per chunk or whole chunks per group (G = 192 etc. would straddle):
  // those shapes take the Highway body.
  if (G % 128 != 0 && 128 % G != 0) return false;
  const size_t k = size_t(K), rows = size_t(R), rows4 = rows / 4 * 4;
  const size_t groups = k / size_t(G), xp_bytes = (rows * k + 63) / 64 * 64;
  uint8_t* scratch = ThreadScratch(xp_bytes + rows4 * groups * sizeof(int32_t));
  int8_t* xp = reinterpret_cast<int8_t*>(scratch);
  int32_t* gs4 = reinterpret_cast<int32_t*>(scratch + xp_bytes);
  PermuteForQ4Chunks(xq, xp, rows, k);
  for (size_t r = 0; r < rows4; ++r) {  // the 4-row tiles' group sums, lane per row
    for (size_t g = 0; g < groups; ++g) gs4[(r / 4 * groups + g) * 4 + r % 4] = group_sums[r * groups + g];
  }
  if (rows < 4) {  // decode: 8 weight rows per tile, two independent accumulator chains
    const auto run = [&](auto call, size_t r, size_t c) {
      decltype(call)::Run(r, c, xp, xscale, gs4, group_sums, w, scales, offsets, bias, y, k, size_t(N), size_t(G));
    };
    size_t c = size_t(n_begin);
    for (; c + 8 <= size_t(n_end); c += 8) {
      for (size_t r = 0; r < rows; ++r) run(Q4Call<1, 8>{}, r, c);
    }
    for (; c < size_t(n_end); ++c) {
      for (size_t r = 0; r < rows; ++r) run(Q4Call<1, 1>{}, r, c);
    }
    return true;
  }
  ForTiles<4, Q4Call>(rows, size_t(n_begin), size_t(n_end), static_cast<const int8_t*>(xp), xscale,
                      static_cast<const int32_t*>(gs4), group_sums, w, scales, offsets, bias, y, k, size_t(N),
                      size_t(G));
  return true;
}

#else  // !SLM_HAVE_VNNI_KERNELS

double VnniDotLoop(int64_t, int32_t*) { return 0; }

bool MatMulQ8DynColumnsVnni(const int8_t*, const float*, const int8_t*, const float*, const float*,
                            float*, int64_t, int64_t, int64_t, int64_t, int64_t) {
  return false;
}
bool MatMulQ4DynColumnsVnni(const int8_t*, const float*, const int32_t*, const uint8_t*,
                            const float*, const float*, const float*, float*, int64_t, int64_t,
                            int64_t, int64_t, int64_t, int64_t) {
  return false;
}

#endif  // SLM_HAVE_VNNI_KERNELS

}  // namespace slm::kernels
