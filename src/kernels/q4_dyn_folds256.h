// The folds of the two 256-bit 8da4w decode tiles — the AVX-VNNI one (matmul_q_avxvnni.cc) and
// the AVX2 one for CPUs without VNNI (matmul_q4_dyn256-inl.h). Both form, per 64-k step and set
// of 4 weight rows, the int32 block sums M (half b: block 2t + b; lane j: weight row 4s + j), by
// vpdpbusd or by vpmaddubsw; from there on they are the same: each group's dot folded into one
// f32 accumulator per output in group order (the 8da4w order of quant_kernels.h: acc =
// fma(float(dot_g), scale_g, acc), dot_g of q − 8 for symmetric groups, + fma(float(Σ_g xq),
// offset_g) for asymmetric ones), then y = fma(acc, x_scale, bias or 0). So they give the same
// bits, and the AVX2 tile's tests run the code the AVX-VNNI tile uses.
//
// The members take target("avx2,fma") and are always inlined: a subset of the AVX-VNNI
// functions' target and of Highway's AVX2 one, and an out-of-line call per step would pass the
// accumulators through memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/vnni_intrinsics.h"

#if SLM_HAVE_VNNI_KERNELS

#define SLM_Q4_FOLDS_MEMBER __attribute__((target("avx2,fma"), always_inline)) inline

namespace slm::kernels::vnni {

// The group sizes the tiles fold: 32 (two groups per 64-k step), 64 (one per step) or a multiple
// of 64 (one per G / 64 steps). A template parameter, so each tile's loop has one path.
enum class Q4Groups { k32, k64, kMulti };

// kSets sets of kSetRows (4, or 1: lanes 1-3 zero) weight rows; row i of the tile at i · stride
// rows from the first. scales / offsets / group_sums: the first row's and the x row's.
template <int kSets, int kSetRows, Q4Groups kG, bool kAsym>
class Q4DynFolds256 {
 public:
  SLM_Q4_FOLDS_MEMBER Q4DynFolds256(const int32_t* group_sums, const float* scales, const float* offsets,
                                    size_t groups, size_t stride, size_t G)
      : group_sums_(group_sums), scales_(scales), offsets_(offsets), rg_(stride * groups), stride_(stride),
        steps_per_group_(kG == Q4Groups::kMulti ? G / 64 : 1) {
    for (int s = 0; s < kSets; ++s) {
      acc_[s] = _mm_setzero_ps();
      pending_[s] = _mm_setzero_si128();
    }
  }

  // Once per 64-k step t, before its sets' Step calls: G = 32 with sets of 4, the step's [Σxq of
  // group 2t ×4, of 2t + 1 ×4], shared by the sets; kMulti, whether t ends its group.
  SLM_Q4_FOLDS_MEMBER void BeginStep(size_t t) {
    t_ = t;
    if constexpr (kG == Q4Groups::k32 && kSetRows == 4) {
      gs_pair_ = _mm256_permutevar8x32_epi32(
          _mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(group_sums_ + 2 * t))),
          _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    }
    if constexpr (kG == Q4Groups::kMulti) {
      group_ends_ = ++into_group_ == steps_per_group_;
      if (group_ends_) into_group_ = 0;
    }
  }

  // The current step's block sums M of set s.
  SLM_Q4_FOLDS_MEMBER void Step(int s, __m256i M) {
    const size_t t = t_;
    const __m128i b0 = _mm256_castsi256_si128(M), b1 = _mm256_extracti128_si256(M, 1);
    if constexpr (kG == Q4Groups::k32 && kSetRows == 4) {
      FoldPair(s, t, M, gs_pair_);
    } else if constexpr (kG == Q4Groups::k32) {
      Fold(s, 2 * t, b0);
      Fold(s, 2 * t + 1, b1);
    } else if constexpr (kG == Q4Groups::k64) {
      Fold(s, t, _mm_add_epi32(b0, b1));
    } else {
      pending_[s] = _mm_add_epi32(pending_[s], _mm_add_epi32(b0, b1));
      if (group_ends_) {
        Fold(s, (t + 1) / steps_per_group_ - 1, pending_[s]);
        pending_[s] = _mm_setzero_si128();
      }
    }
  }

  // y[(4s + j) · stride] = fma(acc, x_scale, bias or 0) for the set's rows.
  SLM_Q4_FOLDS_MEMBER void Store(float xscale, const float* bias, float* y) const {
    for (int s = 0; s < kSets; ++s) {
      alignas(16) float out[4];
      const auto at = [&](int j) { return bias != nullptr && j < kSetRows ? bias[(4 * s + j) * stride_] : 0.0f; };
      _mm_store_ps(out, _mm_fmadd_ps(acc_[s], _mm_set1_ps(xscale), _mm_setr_ps(at(0), at(1), at(2), at(3))));
      for (int j = 0; j < kSetRows; ++j) y[(4 * s + j) * stride_] = out[j];
    }
  }

 private:
  // Lane j: v[(4s + j) · rg + g] for the set's weight rows (0 past kSetRows).
  SLM_Q4_FOLDS_MEMBER __m128 ByRow(const float* v, int s, size_t g) const {
    if constexpr (kSetRows == 4) {
      const float* p = v + 4 * s * rg_ + g;
      return _mm_setr_ps(p[0], p[rg_], p[2 * rg_], p[3 * rg_]);
    } else {
      return _mm_setr_ps(v[g], 0.0f, 0.0f, 0.0f);
    }
  }

  // acc[s] (+)= group g's dots d (lane per weight row of set s).
  SLM_Q4_FOLDS_MEMBER void Fold(int s, size_t g, __m128i d) {
    const __m128i gs = _mm_set1_epi32(group_sums_[g]);
    const __m128 scale = ByRow(scales_, s, g);
    if constexpr (!kAsym) {
      acc_[s] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_sub_epi32(d, _mm_slli_epi32(gs, 3))), scale, acc_[s]);
    } else {
      acc_[s] = _mm_fmadd_ps(_mm_cvtepi32_ps(gs), ByRow(offsets_, s, g), _mm_fmadd_ps(_mm_cvtepi32_ps(d), scale, acc_[s]));
    }
  }

  // Per row the two values at g, g + 1 in one 8-byte load, transposed to [rows at g] and [rows at
  // g + 1].
  SLM_Q4_FOLDS_MEMBER void Pairs(const float* v, int s, size_t g, __m128* at_g, __m128* at_g1) const {
    const float* p = v + 4 * s * rg_ + g;
    const auto two = [](const float* q) { return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))); };
    const __m128 r01 = _mm_unpacklo_ps(two(p), two(p + rg_));  // [r0 g, r1 g, r0 g+1, r1 g+1]
    const __m128 r23 = _mm_unpacklo_ps(two(p + 2 * rg_), two(p + 3 * rg_));
    *at_g = _mm_movelh_ps(r01, r23);
    *at_g1 = _mm_movehl_ps(r23, r01);
  }

  // G = 32, sets of 4: the step's groups g = 2t, g + 1 at once (not a float gathered at a time),
  // folded in order g, then g + 1.
  SLM_Q4_FOLDS_MEMBER void FoldPair(int s, size_t t, __m256i M, __m256i gs) {
    const size_t g = 2 * t;
    __m128 s0, s1;
    Pairs(scales_, s, g, &s0, &s1);
    if constexpr (!kAsym) {
      const __m256 D = _mm256_cvtepi32_ps(_mm256_sub_epi32(M, _mm256_slli_epi32(gs, 3)));
      acc_[s] = _mm_fmadd_ps(_mm256_castps256_ps128(D), s0, acc_[s]);
      acc_[s] = _mm_fmadd_ps(_mm256_extractf128_ps(D, 1), s1, acc_[s]);
    } else {
      __m128 o0, o1;
      Pairs(offsets_, s, g, &o0, &o1);
      const __m256 D = _mm256_cvtepi32_ps(M), GS = _mm256_cvtepi32_ps(gs);
      acc_[s] = _mm_fmadd_ps(_mm256_castps256_ps128(GS), o0, _mm_fmadd_ps(_mm256_castps256_ps128(D), s0, acc_[s]));
      acc_[s] = _mm_fmadd_ps(_mm256_extractf128_ps(GS, 1), o1, _mm_fmadd_ps(_mm256_extractf128_ps(D, 1), s1, acc_[s]));
    }
  }

  const int32_t* group_sums_;
  const float* scales_;
  const float* offsets_;
  size_t rg_, stride_, steps_per_group_;
  __m128 acc_[kSets];
  __m128i pending_[kSets];  // kMulti: the current group's dots over its steps
  size_t t_ = 0;            // the current step
  __m256i gs_pair_ = _mm256_setzero_si256();  // G = 32, sets of 4: BeginStep's group sums
  size_t into_group_ = 0;   // kMulti: steps of the current group done
  bool group_ends_ = false;  // kMulti: the current step ends its group
};

}  // namespace slm::kernels::vnni

#undef SLM_Q4_FOLDS_MEMBER

#endif  // SLM_HAVE_VNNI_KERNELS
