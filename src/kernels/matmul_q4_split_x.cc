// AVX-512 VNNI body of the weight-only int4 decode product (R < 4 rows of f32 x), used by
// MatMulQ4Columns' dispatch (quant_kernels.h) ahead of the Highway bodies.
//
// Why: the kernel it replaced (AVX-512 BF16, ninth session) multiplied every 128 weights by
// three bf16 parts of x with 12 vdpbf16ps and made bf16 of the nibbles with 4 vpermw: it was
// compute-bound (one core ~30 GB/s of weights from cache), below the DRAM stream two threads can
// take. Here x is split into three int8 parts and every 128 weights cost 6 vpdpbusd on the raw
// nibbles (two masks and a shift to unpack, no lookup), the parts combined in the int32
// accumulator. BM_MatMulQ4G32 1×8192×16384 (from DRAM) 1.13–1.37× the BF16 body, 1×2048×2048 (in
// cache) 0.94–2.15× (3 alternations, noisy); 1B int4 decode 1.14–1.18× (2 threads, 4 of 4
// alternated rounds).
//
// Precision: x is scaled per 8 values — the 4 of each half of a 32-weight block that one
// vpdpbusd lane multiplies (lane j of block b: x[32b + 4j .. +3] and x[32b + 16 + 4j .. +3]):
// s = max|x| / 127 over them, t = x / s, and the parts are q1 = round(t), q2 = round(128·(t − q1)),
// q3 = round(128·(128·(t − q1) − q2)) (|q2|, |q3| ≤ 64), so x = s·(q1 + q2/128 + q3/16384) to
// within s·2⁻¹⁵ — 2⁻²² of the lane's largest |x|, the order of f32 rounding for the lane's
// large values. A scale per 8 values keeps an activation outlier from costing more than its 7
// lane mates their precision (an experiment with 1% of the values ×300, K = 8192: one scale per
// row of x 1.8e-5 of Σ|x·ŵ|, per 32-value block 2.1e-6, per lane 8.9e-7; the BF16 body 4.8e-7).
// One dword lane of vpdpbusd sums 4 weights (u8 nibbles) × 4 x parts (s8); the accumulator takes
// part 1, is shifted left 7, takes part 2, shifted, part 3, giving 16384·Σ q·(q1 + q2/128 +
// q3/16384) exactly (|lane| < 2²⁸). Subtracting the x-only lane constant 8·Σ(16384·q1 + 128·q2 +
// q3) (once per x row) leaves Σ (q − 8)·x̂ in integers, so the float conversion rounds the centred
// sum, not one ~15/8 times larger; each lane then gets its group scale × its x scale.
//
// Layout: a 64-byte load is one chunk of 128 weights (four 32-weight Q4 blocks, quant_kernels.h);
// low nibbles are weights 32·b + j, high nibbles 32·b + 16 + j of byte 16·b + j. Lane i of a
// vpdpbusd covers bytes 4i..4i+3, i.e. block i/4: the chunk's group scales are the lane vector
// of the planes kernels (vnni::Q4ChunkScales); the x scales are one float per lane.
#include "kernels/matmul_q4_split_x.h"

#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/decode_prefetch.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/vnni_intrinsics.h"

namespace slm::kernels {

#if SLM_HAVE_VNNI_KERNELS

namespace {

constexpr size_t kChunk = vnni::kQ4PlaneChunk;
constexpr size_t kParts = 3;
// Per chunk: kParts × (64 low-nibble bytes, 64 high-nibble bytes) of x parts.
constexpr size_t kChunkPartBytes = 2 * kParts * 64;

// One x row split for the tiles: per chunk c, parts[c] (kChunkPartBytes: part p's low-half bytes
// at 128·p, high-half bytes at 128·p + 64), centre[16c..16c+16) (per lane: 8 · Σ of the combined
// parts of its 8 x) and lane_scales[16c..16c+16) (s / 16384; NaN where x has a NaN or infinity).
SLM_VNNI_TARGET void SplitX(const float* x, int8_t* parts, int32_t* centre, float* lane_scales,
                            size_t chunks) {
  const __m512 sign = _mm512_set1_ps(-0.0f), step = _mm512_set1_ps(128.0f);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (size_t c = 0; c < chunks; ++c) {
    int8_t* pc = parts + c * kChunkPartBytes;
    alignas(64) int32_t combined[2][16];
    for (size_t b = 0; b < 4; ++b) {
      const float* xb = x + c * kChunk + 32 * b;
      const __m512 lo = _mm512_loadu_ps(xb), hi = _mm512_loadu_ps(xb + 16);
      // Lane j of a vpdpbusd takes x 4j..4j+3 of both halves: their max, in every element of
      // the 128-bit lane j.
      __m512 m = _mm512_max_ps(_mm512_andnot_ps(sign, lo), _mm512_andnot_ps(sign, hi));
      m = _mm512_max_ps(m, _mm512_permute_ps(m, 0xB1));
      m = _mm512_max_ps(m, _mm512_permute_ps(m, 0x4E));
      // x / s rather than x · (127 / max): 127 / max overflows for max below ~1e-37. A NaN or an
      // infinity makes its lane's scale NaN, so the outputs it touches are NaN, as in f32.
      const __m512 scale = _mm512_mul_ps(m, _mm512_set1_ps(1.0f / 127.0f));
      const __mmask16 nonzero = _mm512_cmp_ps_mask(m, _mm512_setzero_ps(), _CMP_GT_OQ);
      const __mmask16 bad = _mm512_fpclass_ps_mask(lo, 0x99) | _mm512_fpclass_ps_mask(hi, 0x99);
      __m512 nan = _mm512_maskz_mov_ps(bad, _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
      nan = _mm512_add_ps(nan, _mm512_permute_ps(nan, 0xB1));
      nan = _mm512_add_ps(nan, _mm512_permute_ps(nan, 0x4E));  // NaN in the whole 128-bit lane
      const __m512 lane_scale = _mm512_add_ps(_mm512_mul_ps(scale, _mm512_set1_ps(1.0f / 16384.0f)), nan);
      _mm_storeu_ps(lane_scales + 16 * c + 4 * b,
                    _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), lane_scale)));
      for (size_t h = 0; h < 2; ++h) {
        const __m512 t = _mm512_maskz_div_ps(nonzero & ~bad, h == 0 ? lo : hi, scale);
        const __m512 q1 = _mm512_roundscale_ps(t, kRound);
        const __m512 r1 = _mm512_mul_ps(_mm512_sub_ps(t, q1), step);  // both steps exact
        const __m512 q2 = _mm512_roundscale_ps(r1, kRound);
        const __m512 q3 = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_sub_ps(r1, q2), step), kRound);
        const __m512i i1 = _mm512_cvtps_epi32(q1), i2 = _mm512_cvtps_epi32(q2), i3 = _mm512_cvtps_epi32(q3);
        int8_t* out = pc + 64 * h + 16 * b;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(i1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 128), _mm512_cvtepi32_epi8(i2));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 256), _mm512_cvtepi32_epi8(i3));
        const __m512i v = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(_mm512_slli_epi32(i1, 7), i2), 7), i3);
        _mm512_store_si512(combined[h], v);
      }
      // Lane 4b + j of the chunk: x 4j..4j+3 of the block's low and high halves.
      for (size_t j = 0; j < 4; ++j) {
        int32_t s = 0;
        for (size_t t = 0; t < 4; ++t) s += combined[0][4 * j + t] + combined[1][4 * j + t];
        centre[16 * c + 4 * b + j] = 8 * s;
      }
    }
  }
}

// y[0..kN) = the dots of one split x row with kN weight rows streamed together (+ bias[0..kN) when
// not null), the row's outputs of those weight rows. Weights are prefetched as the int8 decode
// tiles do (decode_prefetch.h: rows up to 1 KB the same chunk of the next tile's rows, longer
// rows 1 KB ahead along the row — for the 1B down_proj, 4 KB rows in tiles of 8, 0.82–0.83 of the
// f32 lm_head's time against 0.87–0.90 with the next tile's rows, 3 alternated rounds), the next
// tile's scales once per line.
template <size_t kScales, size_t kN>
SLM_VNNI_TARGET inline void Q4SplitXTile(const float* x, const int8_t* parts, const int32_t* centre,
                                         const float* lane_scales, const float* xg, const uint8_t* w,
                                         const float* scales, const float* offsets, size_t K,
                                         size_t G, const float* bias, float* y) {
  const size_t row_bytes = K / 2, groups = K / G, chunks = K / kChunk;
  __m512 acc[kN];
  for (size_t r = 0; r < kN; ++r) acc[r] = _mm512_setzero_ps();
  vnni::Q4ChunkScaleIndex<kScales> s(G);
  for (size_t c = 0; c < chunks; ++c, s.Next()) {
    const int8_t* pc = parts + c * kChunkPartBytes;
    const __m512i x1l = _mm512_loadu_si512(pc), x1h = _mm512_loadu_si512(pc + 64);
    const __m512i x2l = _mm512_loadu_si512(pc + 128), x2h = _mm512_loadu_si512(pc + 192);
    const __m512i x3l = _mm512_loadu_si512(pc + 256), x3h = _mm512_loadu_si512(pc + 320);
    const __m512i cc = _mm512_loadu_si512(centre + 16 * c);
    const __m512 bs = _mm512_loadu_ps(lane_scales + 16 * c);
    // One prefetch distance for all the tile's rows at this chunk, and running row pointers: with
    // the address and the scale-line test worked out per row, GCC kept 16 row offsets on the
    // stack and spent ~14 scalar instructions per row on them (597 instructions per 96 vpdpbusd).
    const uint8_t* wc = w + c * (kChunk / 2);
    const size_t ahead = DecodePrefetchDistance(c * (kChunk / 2), row_bytes, kN);
    const float* sc = scales + *s;
#pragma GCC unroll 16
    for (size_t r = 0; r < kN; ++r, wc += row_bytes, sc += groups) {
      PrefetchDecodeLine(wc + ahead);
      __m512i lo, hi;
      vnni::LoadNibbles(wc, lo, hi);
      __m512i d = vnni::Dpbusd(vnni::Dpbusd(_mm512_setzero_si512(), lo, x1l), hi, x1h);
      d = vnni::Dpbusd(vnni::Dpbusd(_mm512_slli_epi32(d, 7), lo, x2l), hi, x2h);
      d = vnni::Dpbusd(vnni::Dpbusd(_mm512_slli_epi32(d, 7), lo, x3l), hi, x3h);
      const __m512 f = _mm512_mul_ps(vnni::Q4ChunkScales<kScales>(sc), bs);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(d, cc)), f, acc[r]);
    }
    if (*s % 16 == 0) {  // the next tile's scales, once per line
      for (size_t r = 0; r < kN; ++r) PrefetchDecodeLine(scales + (r + kN) * groups + *s);
    }
  }
  for (size_t r = 0; r < kN; ++r) {
    const float dot = vnni::Q4RowDot(acc[r], x, w + r * row_bytes, scales + r * groups,
                                     offsets ? offsets + r * groups : nullptr, xg, K, G);
    y[r] = bias ? dot + bias[r] : dot;
  }
}

template <size_t kScales>
SLM_VNNI_TARGET void Q4SplitXRows(const float* x, const uint8_t* w, const float* scales,
                                  const float* offsets, const float* bias, float* y, size_t R,
                                  size_t K, size_t N, size_t G, size_t n_begin, size_t n_end) {
  const size_t groups = K / G, row_bytes = K / 2, chunks = K / kChunk;
  // Scratch, every piece 64-byte aligned: the group sums (used with offsets; padded to 16), then
  // per chunk 16 lane scales, 16 centres and the parts.
  const size_t xg_floats = (groups + 15) / 16 * 16;
  uint8_t* scratch = vnni::ThreadScratch(63 + 4 * xg_floats + chunks * (4 * 16 + 4 * 16 + kChunkPartBytes));
  float* xg = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) / 64 * 64);
  float* lane_scales = xg + xg_floats;
  int32_t* centre = reinterpret_cast<int32_t*>(lane_scales + 16 * chunks);
  int8_t* parts = reinterpret_cast<int8_t*>(centre + 16 * chunks);
  for (size_t r = 0; r < R; ++r) {
    const float* xr = x + r * K;
    SplitX(xr, parts, centre, lane_scales, chunks);
    if (offsets) vnni::Q4GroupSums(xr, xg, groups, G);
    size_t c = n_begin;
    const auto tiles = [&](auto n_tag) SLM_VNNI_TARGET __attribute__((always_inline)) {
      constexpr size_t kN = decltype(n_tag)::value;
      for (; c + kN <= n_end; c += kN) {
        Q4SplitXTile<kScales, kN>(xr, parts, centre, lane_scales, xg, w + c * row_bytes, scales + c * groups,
                                  offsets ? offsets + c * groups : nullptr, K, G, bias ? bias + c : nullptr, y + r * N + c);
      }
    };
    // 16 weight rows at a time where rows are 1 KB or less (K <= 2048), else 8, then 4 and 1 at
    // the edges: the x parts are loaded once per chunk for all of a tile's rows, and more rows
    // in flight is more memory-level parallelism. 1B int4 decode, `--profile`, alternated
    // rounds (ms per call; lm_head, f32 and unchanged, as the yardstick of each run's memory):
    // tiles of 4 (and K = 8192 one row at a time) -> 8: gate/up_proj 0.90–1.02 -> 0.69–0.82 of
    // lm_head's time; down_proj one row at a time -> 8 rows: 5.03–5.08 -> 4.34–4.49 ms (3 rounds);
    // 8 -> 16: gate/up 4.15–4.40 -> 3.77–4.01 ms, down_proj 4.22–4.64 -> 4.95–5.38 (3 rounds).
    if (row_bytes <= 1024) tiles(std::integral_constant<size_t, 16>{});
    tiles(std::integral_constant<size_t, 8>{});
    tiles(std::integral_constant<size_t, 4>{});
    tiles(std::integral_constant<size_t, 1>{});
  }
}

}  // namespace

bool MatMulQ4ColumnsSplitX(const float* x, const uint8_t* w, const float* scales,
                           const float* offsets, const float* bias, float* y, int64_t R, int64_t K,
                           int64_t N, int64_t G, int64_t n_begin, int64_t n_end) {
  if (!VnniAvailable() || R >= kQ4SplitXMaxRows || !vnni::Q4PlanesApply(size_t(K), size_t(G))) return false;
  const size_t r = size_t(R), k = size_t(K), n = size_t(N), g = size_t(G);
  switch (kChunk / g) {
    case 4: Q4SplitXRows<4>(x, w, scales, offsets, bias, y, r, k, n, g, size_t(n_begin), size_t(n_end)); break;
    case 2: Q4SplitXRows<2>(x, w, scales, offsets, bias, y, r, k, n, g, size_t(n_begin), size_t(n_end)); break;
    default: Q4SplitXRows<1>(x, w, scales, offsets, bias, y, r, k, n, g, size_t(n_begin), size_t(n_end)); break;
  }
  return true;
}

#else  // !SLM_HAVE_VNNI_KERNELS

bool MatMulQ4ColumnsSplitX(const float*, const uint8_t*, const float*, const float*, const float*,
                           float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) {
  return false;
}

#endif  // SLM_HAVE_VNNI_KERNELS

}  // namespace slm::kernels
