// Shared pieces of the AVX-512 kernels written with intrinsics (matmul_q_vnni*.cc,
// matmul_q4_split_x.cc, matmul_q4_planes-inl.h): the VNNI function-level target, and
// helpers GCC 12 compiles badly from the plain intrinsics.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <vector>
#define SLM_HAVE_VNNI_KERNELS 1
// GCC 12 reports the deliberately undefined upper lanes of the 128/256 → 512-bit casts as
// uninitialized; they are never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define SLM_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))
// Plain AVX-512F: inlinable into the VNNI functions and into Highway's AVX3 targets alike.
#define SLM_AVX512F_TARGET __attribute__((target("avx512f")))
// Plain AVX2: inlinable into the AVX-512 VNNI and the AVX-VNNI functions.
#define SLM_AVX2_TARGET __attribute__((target("avx2")))
// AVX-VNNI (the VEX-encoded 256-bit vpdpbusd of CPUs without AVX-512): the function-level target
// of matmul_q_avxvnni*.cc and matmul_q4_split_x_avxvnni.cc.
#define SLM_AVXVNNI_TARGET __attribute__((target("avx2,fma,avxvnni")))

namespace slm::kernels::vnni {

// Horizontal sums (not _mm512_reduce_add_*: GCC 12 warns about their undefined-vector temporaries).
SLM_AVX512F_TARGET inline float ReduceAdd(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}
SLM_VNNI_TARGET inline int32_t ReduceAdd(__m512i v) {
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(1, 0, 3, 2)));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(q);
}

// acc + Σ₄ a(u8)·b(s8) per int32 lane. GCC 12 compiles _mm512_dpbusd_epi32 in unrolled tiles
// with a register copy in and out of every accumulator per step (the loop's instruction count
// doubles and accumulators spill); the inline asm keeps each accumulator in place.
SLM_VNNI_TARGET inline __m512i Dpbusd(__m512i acc, __m512i a, __m512i b) {
#if defined(__GNUC__) && !defined(__clang__)
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
  return acc;
#else
  return _mm512_dpbusd_epi32(acc, a, b);
#endif
}

// The 256-bit EVEX form (AVX-512VL), for the AVX-512 VNNI decode tile that steps 32 bytes per
// weight row (matmul_q_vnni.cc). {evex}: the VEX form is AVX-VNNI, which AVX-512 VNNI CPUs such as
// Ice Lake and Cascade Lake do not have.
SLM_VNNI_TARGET inline __m256i Dpbusd(__m256i acc, __m256i a, __m256i b) {
#if defined(__GNUC__) && !defined(__clang__)
  __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
  return acc;
#else
  return _mm256_dpbusd_epi32(acc, a, b);
#endif
}
SLM_VNNI_TARGET inline int32_t ReduceAdd(__m256i v) {
  __m128i q = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(1, 0, 3, 2)));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(q);
}

// The 256-bit forms for the AVX-VNNI bodies: acc + Σ₄ a(u8)·b(s8) per int32 lane, the horizontal
// sums and a byte pack. Dpbusd256 in inline asm for the reason Dpbusd is: with
// _mm256_dpbusd_avx_epi32 GCC 12 copied every accumulator of the panel tiles through another
// register and stored it to the stack at every step (53 instructions per 12 vpdpbusd; 27 this way).
SLM_AVXVNNI_TARGET inline __m256i Dpbusd256(__m256i acc, __m256i a, __m256i b) {
#if defined(__GNUC__) && !defined(__clang__)
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "xm"(b));
  return acc;
#else
  return _mm256_dpbusd_avx_epi32(acc, a, b);
#endif
}
// The low and high nibbles (each 0..15 in a byte) of 64 packed Q4 bytes. The empty asm keeps the
// loaded vector in a register: from a plain load GCC 12 folded it into both uses as memory
// operands and, inside the unrolled decode tiles, stored it to the stack and read it back twice
// per weight row (three memory operations more per 64 bytes of weights). Measured on Zen 5
// (docs/benchmarks.md, twenty-ninth session): 1B 8da4w decode +6.7% (medians of 8 alternated
// rounds, faster in all 8); int4 weight-only within noise, its split-x tile being bound by the
// vpdpbusd / FMA ports (with two x parts instead of three the fix was worth +35% in cache).
SLM_VNNI_TARGET inline void LoadNibbles(const void* p, __m512i& lo, __m512i& hi) {
  __m512i v = _mm512_loadu_si512(p);
  __asm__("" : "+v"(v));
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  lo = _mm512_and_si512(v, nibble);
  hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
}
// The same for 32 packed bytes (the AVX-VNNI bodies).
SLM_AVX2_TARGET inline void LoadNibbles256(const void* p, __m256i& lo, __m256i& hi) {
  __m256i v = _mm256_loadu_si256(static_cast<const __m256i*>(p));
  __asm__("" : "+x"(v));
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  lo = _mm256_and_si256(v, nibble);
  hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
}
SLM_AVX2_TARGET inline int32_t ReduceAdd256(__m256i v) {
  __m128i q = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(1, 0, 3, 2)));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(q);
}
// 8 int32 lanes holding int8 values → 8 bytes (the split-x parts).
SLM_AVX2_TARGET inline int64_t PackBytes256(__m256i v) {
  const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm_cvtsi128_si64(_mm_packs_epi16(w16, w16));
}
SLM_AVX2_TARGET inline float ReduceAdd256(__m256 v) {
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// The group scales of one 128-weight chunk of a Q4 row as a lane vector: lane i belongs to the
// chunk's 32-weight block i/4. `first` points at the chunk's first group scale (group c·128 / G
// of chunk c); kScales = 128 / G scales per chunk (4 or 2), or 1 when G is a multiple of 128.
// Shared by the int4 decode planes kernel, the VNNI decode tiles and the VNNI panel unpack (whose
// 16-lane sums follow the same block order).
template <size_t kScales>
SLM_AVX512F_TARGET inline __m512 Q4ChunkScales(const float* first) {
  if constexpr (kScales == 4) {
    const __m512i lanes = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(_mm_loadu_ps(first)));
  } else if constexpr (kScales == 2) {
    const __m512i lanes = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    // 8 bytes that are only 4-byte aligned: _mm_loadl_epi64 (an unaligned load), not _mm_load_sd.
    const __m128 two = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(first)));
    return _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(two));
  } else {
    return _mm512_set1_ps(*first);
  }
}

// The first group-scale index of consecutive chunks of `chunk` weights (c·chunk / G for chunk c;
// 128 for the AVX-512 kernels, 64 for the AVX2 planes kernel), stepped without a division per
// chunk (a 64-bit divide per chunk sat in the decode kernels' loops).
template <size_t kScales>
class Q4ChunkScaleIndex {
 public:
  explicit Q4ChunkScaleIndex(size_t G, size_t chunk = 128) : chunks_per_scale_(kScales > 1 ? 1 : G / chunk) {}
  size_t operator*() const { return s_; }
  void Next() {
    if constexpr (kScales > 1) {
      s_ += kScales;
    } else if (++into_ == chunks_per_scale_) {
      into_ = 0;
      ++s_;
    }
  }

 private:
  size_t chunks_per_scale_, s_ = 0, into_ = 0;
};

// ---- Q4 chunk pieces shared by the int4 decode kernels (matmul_q4_planes-inl.h,
// matmul_q4_split_x.cc) ----

// Weights per 64-byte chunk.
constexpr size_t kQ4PlaneChunk = 128;

// True where the planes kernels apply: K holds at least one chunk and a group never straddles a
// chunk's scale vector (G divides 128 or 128 divides G).
inline bool Q4PlanesApply(size_t K, size_t G) {
  return K >= kQ4PlaneChunk && (kQ4PlaneChunk % G == 0 || G % kQ4PlaneChunk == 0);
}

// Plane m of a chunk holds, in lane i, nibble m of the chunk's dword i: weight
// 32·(i/4) + 4·(i%4) + m/2 + 16·(m%2) (the Q4 block layout of quant_kernels.h). The 128 x of one
// chunk in that order: planes[m] lane i = xc[32·(i/4) + 4·(i%4) + m/2 + 16·(m%2)]. Per half h
// (m % 2): lanes i < 8 come from blocks 0 and 1, lanes 8.. from blocks 2 and 3, each pair one
// two-source permute, then blended.
SLM_AVX512F_TARGET inline void ChunkToPlanes(const float* xc, __m512 planes[8]) {
  // Lane i of plane pair t: ((i/4) % 2)·16 + 4·(i%4) + t.
  const __m512i base = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  for (int h = 0; h < 2; ++h) {
    const __m512 b0 = _mm512_loadu_ps(xc + 16 * h), b1 = _mm512_loadu_ps(xc + 32 + 16 * h);
    const __m512 b2 = _mm512_loadu_ps(xc + 64 + 16 * h), b3 = _mm512_loadu_ps(xc + 96 + 16 * h);
    for (int t = 0; t < 4; ++t) {
      const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(t));
      const __m512 lo = _mm512_permutex2var_ps(b0, idx, b1);
      const __m512 hi = _mm512_permutex2var_ps(b2, idx, b3);
      planes[2 * t + h] = _mm512_mask_blend_ps(0xFF00, lo, hi);
    }
  }
}

// xp[c·128 + 16·m + i] = plane m of chunk c (ChunkToPlanes) for the K/128 whole chunks.
SLM_AVX512F_TARGET inline void PermuteToPlanes(const float* x, float* xp, size_t chunks) {
  for (size_t c = 0; c < chunks; ++c) {
    __m512 planes[8];
    ChunkToPlanes(x + c * kQ4PlaneChunk, planes);
    for (int m = 0; m < 8; ++m) _mm512_storeu_ps(xp + c * kQ4PlaneChunk + 16 * m, planes[m]);
  }
}

// The first 64-byte boundary in a grow-only buffer of at least `bytes` + 63. Line-aligned
// scratch: a 64-byte load or an AMX tile row that straddles two lines reads both (malloc returns
// 16-byte aligned blocks; an AMX panel's tile steps took 1.8–2× the time from such a buffer).
inline uint8_t* Aligned64(std::vector<uint8_t>& buf, size_t bytes) {
  if (buf.size() < bytes + 63) buf.resize(bytes + 63);
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - p % 64) % 64);
}

// Grow-only per-thread scratch of the intrinsics decode bodies (matmul_q_vnni.cc,
// matmul_q4_split_x.cc): one buffer per thread, which they share because neither runs inside the
// other; allocates on a thread's first call for a given size only. 64-byte aligned.
inline uint8_t* ThreadScratch(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  return Aligned64(buf, bytes);
}

// Grow-only per-thread scratch of the panel GEMMs (matmul_q_vnni_panel.cc,
// matmul_q_avxvnni_panel.cc, matmul_q_amx.cc), apart from ThreadScratch because their callers
// keep per-row sums there. 64-byte aligned.
inline uint8_t* PanelScratch(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  return Aligned64(buf, bytes);
}

// xg[g] = Σ_{k∈g} x_k for the `groups` groups of G (a multiple of 16) weights.
SLM_AVX512F_TARGET inline void Q4GroupSums(const float* x, float* xg, size_t groups, size_t G) {
  for (size_t g = 0; g < groups; ++g) {
    __m512 sum = _mm512_setzero_ps();
    for (size_t k = g * G; k < (g + 1) * G; k += 16) sum = _mm512_add_ps(sum, _mm512_loadu_ps(x + k));
    xg[g] = ReduceAdd(sum);
  }
}

// The planes kernels sum (q − 8)·x per group and apply the scale once per chunk:
//   Σ_k ŵ_k·x_k = Σ_g s_g · Σ_{k∈g} (q_k − 8)·x_k  +  Σ_g (o_g + 8·s_g) · Σ_{k∈g} x_k
// (ŵ = q·s + o; symmetric groups have o = −8·s, so their second term is zero). This is the
// second term over a row's groups, as a lane vector to add before the reduction.
SLM_AVX512F_TARGET inline __m512 Q4OffsetTerm(const float* scales, const float* offsets,
                                              const float* xg, size_t groups) {
  const __m512 eight = _mm512_set1_ps(8.0f);
  __m512 acc = _mm512_setzero_ps();
  for (size_t g = 0; g < groups; g += 16) {
    const __mmask16 m = groups - g >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (groups - g)) - 1);
    const __m512 o = _mm512_fmadd_ps(eight, _mm512_maskz_loadu_ps(m, scales + g), _mm512_maskz_loadu_ps(m, offsets + g));
    acc = _mm512_fmadd_ps(o, _mm512_maskz_loadu_ps(m, xg + g), acc);
  }
  return acc;
}

// Σ over the blocks of 32 from weight `from` (past the whole chunks the kernel's vectors took) to
// K of one weight row, from unpermuted x (the first term above; the second covers these groups
// too).
inline float Q4TailBlocks(const float* x, const uint8_t* w, const float* scales, size_t from, size_t K, size_t G) {
  float s = 0.0f;
  for (size_t b = from; b < K; b += 32) {
    float dot = 0.0f;
    for (size_t j = 0; j < 16; ++j) {
      dot += float(int(w[b / 2 + j] & 0x0F) - 8) * x[b + j] + float(int(w[b / 2 + j] >> 4) - 8) * x[b + 16 + j];
    }
    s += scales[b / G] * dot;
  }
  return s;
}

// The end of one weight row of the int4 decode tiles (matmul_q4_planes-inl.h,
// matmul_q4_split_x.cc), whose lanes hold s_g · Σ (q − 8)·x of the whole chunks: the offsets
// term of asymmetric groups (offsets_row null when symmetric), the lane sum, and the blocks past
// the whole chunks.
SLM_AVX512F_TARGET inline float Q4RowDot(__m512 acc, const float* x, const uint8_t* w_row,
                                         const float* scales_row, const float* offsets_row,
                                         const float* xg, size_t K, size_t G) {
  const size_t groups = K / G;
  if (offsets_row) acc = _mm512_add_ps(acc, Q4OffsetTerm(scales_row, offsets_row, xg, groups));
  return ReduceAdd(acc) + Q4TailBlocks(x, w_row, scales_row, K / kQ4PlaneChunk * kQ4PlaneChunk, K, G);
}

// dst[K] = the codes of one packed Q4 row (quant_kernels.h layout) in k order, one byte per
// weight: q − 8 as signed bytes (kSigned) or q. K % 64 == 0. Shared by the AVX-512 VNNI and the
// AVX-VNNI panels.
template <bool kSigned>
SLM_AVX2_TARGET inline void UnpackQ4Row(const uint8_t* src, uint8_t* dst, size_t K) {
  // 64 k per step: 32 bytes = two 32-k blocks; the low nibbles of block b are k 32b..32b+15,
  // its high nibbles k 32b+16..32b+31.
  const __m256i mask = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(kSigned ? 8 : 0);
  for (size_t k = 0; k < K; k += 64) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k / 2));
    const __m256i lo = _mm256_and_si256(v, mask), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), _mm256_sub_epi8(_mm256_permute2x128_si256(lo, hi, 0x20), eight));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k + 32), _mm256_sub_epi8(_mm256_permute2x128_si256(lo, hi, 0x31), eight));
  }
}

}  // namespace slm::kernels::vnni

#else
#define SLM_HAVE_VNNI_KERNELS 0
#endif
