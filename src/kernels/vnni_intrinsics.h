// Shared pieces of the AVX-512 VNNI kernels (matmul_q_vnni*.cc): the function-level target, and
// helpers GCC 12 compiles badly from the plain intrinsics.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#define SLM_HAVE_VNNI_KERNELS 1
// GCC 12 reports the deliberately undefined upper lanes of the 128/256 → 512-bit casts as
// uninitialized; they are never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define SLM_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))
// Plain AVX-512F: inlinable into the VNNI functions and into Highway's AVX3 targets alike.
#define SLM_AVX512F_TARGET __attribute__((target("avx512f")))

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

// The first group-scale index of consecutive 128-weight chunks (c·128 / G for chunk c), stepped
// without a division per chunk (a 64-bit divide per chunk sat in the decode kernels' loops).
template <size_t kScales>
class Q4ChunkScaleIndex {
 public:
  explicit Q4ChunkScaleIndex(size_t G) : chunks_per_scale_(kScales > 1 ? 1 : G / 128) {}
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

}  // namespace slm::kernels::vnni

#else
#define SLM_HAVE_VNNI_KERNELS 0
#endif
