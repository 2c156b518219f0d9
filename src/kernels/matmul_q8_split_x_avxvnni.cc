// AVX-VNNI body of the weight-only int8 decode product (R < kQ4SplitXMaxRows rows of f32 x), for
// CPUs with AVX-VNNI and no AVX-512 (Intel Alder Lake and later client cores), where
// MatMulQ8Columns' dispatch would otherwise run the Highway AVX2 tile: per 8 weights a widening
// load, a convert and an FMA (compute-bound at 47–49% of the DRAM bound on the 1B shape).
//
// The split-x method of the int4 kernels (matmul_q4_split_x.cc) on int8 weights: x is split per
// 4 values — the 4 consecutive k one vpdpbusd lane multiplies — into three int8 parts,
// x = s·(q1 + q2/128 + q3/16384), s = max|x|/127 over the 4, so x keeps ~2⁻²² of its lane's
// largest |x|. The weights become the unsigned operand (w + 128, one XOR per load), and every 32
// weights cost 3 vpdpbusd, the parts combined in the int32 accumulator (shifted left 7 between
// parts); the x-only lane constant 128·Σ(16384·q1 + 128·q2 + q3) then leaves Σ w·x̂ exactly. The
// accumulator can pass 2³⁰ (255·4·(16384·127 + 128·64 + 64) < 2³¹) but Σ w·x̂ itself stays within
// ±2³⁰, and the int32 subtraction wraps, so the difference is exact. Each lane then gets its x
// scale; the row's scale applies once at the end.
//
// (On AVX-512 the same idea with 8-row tiles lost to the Highway 8-row f32 tile and was not
// kept, matmul_q-inl.h; on AVX2 the Highway tile has 4 rows and half the width.)
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/decode_prefetch.h"
#include "kernels/matmul_q4_split_x.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/vnni_intrinsics.h"

namespace slm::kernels {

#if SLM_HAVE_VNNI_KERNELS

namespace {

using vnni::Dpbusd256;
using vnni::PackBytes256;
using vnni::ReduceAdd256;

constexpr size_t kStep = 32;  // weights per 32-byte load: 8 lanes of 4

// One x row split for the tile: parts p = 0, 1, 2 at parts + p·K (x in k order as int8), per lane
// of 4 values centre[k / 4] = 128 · Σ of their combined parts and lane_scales[k / 4] = s / 16384
// (NaN where the 4 hold a NaN or an infinity, so that the outputs they touch are NaN, as in f32).
SLM_AVXVNNI_TARGET void SplitX(const float* x, size_t K, int8_t* parts, int32_t* centre, float* lane_scales) {
  const __m256 sign = _mm256_set1_ps(-0.0f), step = _mm256_set1_ps(128.0f);
  const __m256 inf = _mm256_set1_ps(INFINITY), nan = _mm256_set1_ps(NAN);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (size_t k = 0; k < K; k += 8) {  // 8 values: two lanes, one per 128-bit half
    const __m256 v = _mm256_loadu_ps(x + k);
    const __m256 a = _mm256_andnot_ps(sign, v);
    __m256 m = _mm256_max_ps(a, _mm256_permute_ps(a, 0xB1));
    m = _mm256_max_ps(m, _mm256_permute_ps(m, 0x4E));
    __m256 bad = _mm256_cmp_ps(a, inf, _CMP_NLT_UQ);  // |x| >= inf or NaN
    bad = _mm256_or_ps(bad, _mm256_permute_ps(bad, 0xB1));
    bad = _mm256_or_ps(bad, _mm256_permute_ps(bad, 0x4E));
    // x / s rather than x · (127 / max): 127 / max overflows for max below ~1e-37.
    const __m256 scale = _mm256_mul_ps(m, _mm256_set1_ps(1.0f / 127.0f));
    const __m256 usable = _mm256_andnot_ps(bad, _mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_GT_OQ));
    const __m256 lane_scale = _mm256_blendv_ps(_mm256_mul_ps(scale, _mm256_set1_ps(1.0f / 16384.0f)), nan, bad);
    lane_scales[k / 4] = _mm256_cvtss_f32(lane_scale);
    lane_scales[k / 4 + 1] = _mm_cvtss_f32(_mm256_extractf128_ps(lane_scale, 1));
    const __m256 t = _mm256_and_ps(_mm256_div_ps(v, scale), usable);
    const __m256 q1 = _mm256_round_ps(t, kRound);
    const __m256 r1 = _mm256_mul_ps(_mm256_sub_ps(t, q1), step);  // both steps exact
    const __m256 q2 = _mm256_round_ps(r1, kRound);
    const __m256 q3 = _mm256_round_ps(_mm256_mul_ps(_mm256_sub_ps(r1, q2), step), kRound);
    const __m256i i1 = _mm256_cvtps_epi32(q1), i2 = _mm256_cvtps_epi32(q2), i3 = _mm256_cvtps_epi32(q3);
    const int64_t p1 = PackBytes256(i1), p2 = PackBytes256(i2), p3 = PackBytes256(i3);
    std::memcpy(parts + k, &p1, 8);
    std::memcpy(parts + K + k, &p2, 8);
    std::memcpy(parts + 2 * K + k, &p3, 8);
    __m256i s = _mm256_add_epi32(_mm256_slli_epi32(_mm256_add_epi32(_mm256_slli_epi32(i1, 7), i2), 7), i3);
    s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0xB1));
    s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4E));
    centre[k / 4] = 128 * _mm256_cvtsi256_si32(s);
    centre[k / 4 + 1] = 128 * _mm_cvtsi128_si32(_mm256_extracti128_si256(s, 1));
  }
}

// y[0..kN) = scale · (x · w) (+ bias) for kN weight rows streamed together, each prefetching as
// the int8 decode tiles do (decode_prefetch.h).
template <size_t kN>
SLM_AVXVNNI_TARGET inline void Tile(const int8_t* parts, const int32_t* centre, const float* lane_scales,
                                    const int8_t* w, const float* scales, const float* bias, float* y, size_t K) {
  const __m256i flip = _mm256_set1_epi8(int8_t(0x80));
  __m256 acc[kN];
  for (size_t r = 0; r < kN; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t k = 0; k < K; k += kStep) {
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(parts + k));
    const __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(parts + K + k));
    const __m256i x3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(parts + 2 * K + k));
    const __m256i cc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(centre + k / 4));
    const __m256 bs = _mm256_loadu_ps(lane_scales + k / 4);
#pragma GCC unroll 8
    for (size_t r = 0; r < kN; ++r) {
      const int8_t* wr = w + r * K;
      if (k % 64 == 0) PrefetchDecodeLine(DecodePrefetchAddress(wr + k, k, K, kN));
      const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + k)), flip);
      __m256i d = Dpbusd256(_mm256_setzero_si256(), v, x1);
      d = Dpbusd256(_mm256_slli_epi32(d, 7), v, x2);
      d = Dpbusd256(_mm256_slli_epi32(d, 7), v, x3);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(d, cc)), bs, acc[r]);
    }
  }
  for (size_t r = 0; r < kN; ++r) {
    const float s = ReduceAdd256(acc[r]) * scales[r];
    y[r] = bias ? s + bias[r] : s;
  }
}

}  // namespace

bool MatMulQ8ColumnsSplitXAvxVnni(const float* x, const int8_t* w, const float* scales, const float* bias,
                                  float* y, int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  if (R >= kQ4SplitXMaxRows || K % int64_t(kStep) != 0 || !AvxVnniAvailable() || VnniAvailable()) return false;
  const size_t k = size_t(K), lanes = k / 4;
  uint8_t* scratch = vnni::ThreadScratch(3 * k + lanes * (sizeof(int32_t) + sizeof(float)));
  float* lane_scales = reinterpret_cast<float*>(scratch);
  int32_t* centre = reinterpret_cast<int32_t*>(scratch + lanes * sizeof(float));
  int8_t* parts = reinterpret_cast<int8_t*>(scratch + lanes * (sizeof(float) + sizeof(int32_t)));
  // 8 weight rows per tile (4 until the nineteenth session): 1B int8 decode, --simd-target AVX2
  // --profile, 3 alternated rounds: 24.0–31.9 -> 26.2–35.1 tok/s, up_proj 1.12–1.28 -> 0.96–1.15
  // of the f32 lm_head's time, down_proj 1.11–1.45 -> 1.12–1.17.
  constexpr size_t kN = 8;
  for (int64_t r = 0; r < R; ++r) {
    SplitX(x + r * K, k, parts, centre, lane_scales);
    float* yr = y + r * N;
    int64_t c = n_begin;
    for (; c + int64_t(kN) <= n_end; c += kN) {
      Tile<kN>(parts, centre, lane_scales, w + c * K, scales + c, bias ? bias + c : nullptr, yr + c, k);
    }
    for (; c < n_end; ++c) Tile<1>(parts, centre, lane_scales, w + c * K, scales + c, bias ? bias + c : nullptr, yr + c, k);
  }
  return true;
}

#else  // !SLM_HAVE_VNNI_KERNELS

bool MatMulQ8ColumnsSplitXAvxVnni(const float*, const int8_t*, const float*, const float*, float*, int64_t,
                                  int64_t, int64_t, int64_t, int64_t) {
  return false;
}

#endif  // SLM_HAVE_VNNI_KERNELS

}  // namespace slm::kernels
