// AVX-512 VNNI bodies of the dynamic-activation quantized products (8da8w, 8da4w): the tiles
// below for decode and short chunks, the panel GEMMs of matmul_q_vnni_panel.cc from
// kVnniPanelRows rows on.
//
// Why not Highway: the Debian 12 Highway (1.0.3) has no op for u8×s8 → i32 dot products, and its
// AVX3_DL target does not enable avx512vnni. These two functions are therefore written with
// intrinsics in a function-level target, chosen at run time by quant_kernels' dispatch when the
// CPU has avx512vnni (VnniAvailable), and tested against the same scalar references as the
// Highway bodies. Everywhere else (AVX2, Arm, old x86) the Highway bodies run.
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
#include <atomic>
#include <cstring>
#include <type_traits>

#include "kernels/decode_prefetch.h"
#include "kernels/vnni_intrinsics.h"

namespace slm::kernels {

namespace {
std::atomic<bool> vnni_enabled_for_test{true};
}  // namespace

bool VnniAvailable() {
#if SLM_HAVE_VNNI_KERNELS
  static const bool available = [] {
    if (vnni::DisabledByEnvironment("SLM_DISABLE_VNNI")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return available && vnni_enabled_for_test.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void SetVnniEnabledForTest(bool enabled) { vnni_enabled_for_test.store(enabled); }

#if SLM_HAVE_VNNI_KERNELS

namespace {
using vnni::Dpbusd;
using vnni::ReduceAdd;
using vnni::ThreadScratch;

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
      _mm_prefetch(static_cast<const char*>(DecodePrefetchAddress(w + c * K + k, k, K, kN)), _MM_HINT_T0);
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
      const int32_t dot = ReduceAdd(acc[r][c]) - 128 * xsum[r];
      float v = float(dot) * xscale[r] * scales[c];
      if (bias) v += bias[c];
      y[r * ldy + c] = v;
    }
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

// kR rows × kN weight rows; K % 64 == 0; kScales = 128 / G group scales per chunk (4, 2), or 1
// when G is a multiple of 128. xp: xq permuted by PermuteForQ4Chunks. Per chunk and weight row:
// one load, two masks and a shift to split the nibbles, two vpdpbusd per x row, and the chunk's
// int32 lanes scaled into f32 with the group scales as one lane vector (vnni::Q4ChunkScales: lane
// i belongs to block i/4, as here). Each weight row prefetches the same chunk of the next tile's
// row (kN rows ahead) and, once per line, the next tile's scales, as the int4 planes kernel.
template <int kR, int kN, size_t kScales>
SLM_VNNI_TARGET inline void Q4Tile(const int8_t* xp, const float* xscale, const float* offset_x,
                                   const uint8_t* w, const float* scales, const float* offsets,
                                   const float* bias, float* y, size_t K, size_t G, size_t ldy) {
  const size_t groups = K / G, row_bytes = K / 2, chunks = K / 128;
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512 acc[kR][kN];
  #pragma GCC unroll 16
  for (int r = 0; r < kR; ++r)
    #pragma GCC unroll 16
    for (int n = 0; n < kN; ++n) acc[r][n] = _mm512_setzero_ps();
  vnni::Q4ChunkScaleIndex<kScales> s(G);  // this chunk's first scale index
  for (size_t c = 0; c < chunks; ++c, s.Next()) {
    __m512i lo[kN], hi[kN];
    __m512 sv[kN];
    #pragma GCC unroll 16
    for (int n = 0; n < kN; ++n) {
      const uint8_t* wc = w + n * row_bytes + 64 * c;
      _mm_prefetch(reinterpret_cast<const char*>(wc + kN * row_bytes), _MM_HINT_T0);
      if (*s % 16 == 0) _mm_prefetch(reinterpret_cast<const char*>(scales + (n + kN) * groups + *s), _MM_HINT_T0);
      const __m512i v = _mm512_loadu_si512(wc);
      lo[n] = _mm512_and_si512(v, nibble);
      hi[n] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
      sv[n] = vnni::Q4ChunkScales<kScales>(scales + n * groups + *s);
    }
    #pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) {
      const __m512i xl = _mm512_loadu_si512(xp + r * K + 128 * c);
      const __m512i xh = _mm512_loadu_si512(xp + r * K + 128 * c + 64);
      #pragma GCC unroll 16
      for (int n = 0; n < kN; ++n) {
        const __m512i dot = Dpbusd(Dpbusd(_mm512_setzero_si512(), lo[n], xl), hi[n], xh);
        acc[r][n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv[n], acc[r][n]);
      }
    }
  }
  if (chunks * 128 < K) {  // a 64-k tail: two blocks, in 256-bit halves of the same scheme
    const size_t k0 = chunks * 128;
    const __m256i nibble256 = _mm256_set1_epi8(0x0F);
    #pragma GCC unroll 16
    for (int n = 0; n < kN; ++n) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + n * row_bytes + k0 / 2));
      const __m256i l = _mm256_and_si256(v, nibble256), h = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble256);
      const float* sc = scales + n * groups;
      const __m256 sv = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(sc[k0 / G])), _mm_set1_ps(sc[(k0 + 32) / G]), 1);
      #pragma GCC unroll 16
      for (int r = 0; r < kR; ++r) {
        const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + r * K + k0));
        const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + r * K + k0 + 32));
        const __m256i dot = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), l, xl), h, xh);
        const __m256 part = _mm256_mul_ps(_mm256_cvtepi32_ps(dot), sv);
        acc[r][n] = _mm512_add_ps(acc[r][n], _mm512_insertf32x8(_mm512_setzero_ps(), part, 0));
      }
    }
  }
  // Offsets term Σ_g offset[c, g] · Σ_{k∈g} xq[r, k], vectorized over groups: offset_x holds
  // the group sums as floats (times -8 when symmetric, whose offsets are -8·scale).
  const __mmask16 tail = __mmask16((1u << (groups % 16)) - 1);
  #pragma GCC unroll 16
  for (int n = 0; n < kN; ++n) {
    const float* on = offsets ? offsets + n * groups : scales + n * groups;
    #pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) {
      const float* gx = offset_x + r * groups;
      __m512 v = acc[r][n];
      size_t g = 0;
      for (; g + 16 <= groups; g += 16) v = _mm512_fmadd_ps(_mm512_loadu_ps(on + g), _mm512_loadu_ps(gx + g), v);
      if (tail) v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, on + g), _mm512_maskz_loadu_ps(tail, gx + g), v);
      float out = ReduceAdd(v) * xscale[r];
      if (bias) out += bias[n];
      y[r * ldy + n] = out;
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
                                  const float* offset_x, const uint8_t* w, const float* scales,
                                  const float* offsets, const float* bias, float* y, size_t K,
                                  size_t N, size_t G) {
    const size_t groups = K / G;
    xp += r * K;
    xscale += r;
    offset_x += r * groups;
    w += c * (K / 2);
    scales += c * groups;
    if (offsets) offsets += c * groups;
    if (bias) bias += c;
    y += r * N + c;
    switch (128 / G) {
      case 4: return Q4Tile<kR, kN, 4>(xp, xscale, offset_x, w, scales, offsets, bias, y, K, G, N);
      case 2: return Q4Tile<kR, kN, 2>(xp, xscale, offset_x, w, scales, offsets, bias, y, K, G, N);
      default: return Q4Tile<kR, kN, 1>(xp, xscale, offset_x, w, scales, offsets, bias, y, K, G, N);
    }
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
  const size_t k = size_t(K), rows = size_t(R);
  int32_t* xsum = reinterpret_cast<int32_t*>(ThreadScratch(rows * sizeof(int32_t)));
  RowSums(xq, xsum, rows, k);
  if (R >= kVnniPanelRows) {
    MatMulQ8DynPanelVnni(xq, xscale, xsum, w, scales, bias, y, R, K, N, n_begin, n_end);
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
  if (R >= kVnniPanelRows) {
    MatMulQ4DynPanelVnni(xq, xscale, group_sums, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end);
    return true;
  }
  // The tiles' chunk scale vectors need a chunk's groups to be whole blocks of G (G = 192 etc.
  // would straddle): those shapes take the Highway body.
  if (G % 128 != 0 && 128 % G != 0) return false;
  const size_t k = size_t(K), rows = size_t(R);
  const size_t groups = k / size_t(G), xp_bytes = (rows * k + 63) / 64 * 64;
  uint8_t* scratch = ThreadScratch(xp_bytes + rows * groups * sizeof(float));
  int8_t* xp = reinterpret_cast<int8_t*>(scratch);
  float* offset_x = reinterpret_cast<float*>(scratch + xp_bytes);
  PermuteForQ4Chunks(xq, xp, rows, k);
  const float factor = offsets ? 1.0f : -8.0f;
  for (size_t i = 0; i < rows * groups; ++i) offset_x[i] = factor * float(group_sums[i]);
  // Weight rows of 2 KB or more one at a time: 4 such rows are 4 memory streams (and 4 of
  // scales) per thread, one row is one of each. 8da4w 1B decode: down_proj (K 8192) -17%, the
  // K 2048 projections (whose 4-row tiles are 4 KB contiguous) no different (ABBA, 6 rounds).
  const auto tiles = [&](auto n_tag) {
    ForTiles<decltype(n_tag)::value, Q4Call>(rows, size_t(n_begin), size_t(n_end), static_cast<const int8_t*>(xp),
                                             xscale, static_cast<const float*>(offset_x), w, scales, offsets,
                                             bias, y, k, size_t(N), size_t(G));
  };
  if (k / 2 >= 2048) tiles(std::integral_constant<int, 1>{});
  else tiles(std::integral_constant<int, 4>{});
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
