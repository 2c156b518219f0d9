// Lane reductions shared by the kernels, compiled once per SIMD target by the files that include
// them.

#if defined(SLM_KERNELS_LANE_SUMS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_LANE_SUMS_INL_H_
#undef SLM_KERNELS_LANE_SUMS_INL_H_
#else
#define SLM_KERNELS_LANE_SUMS_INL_H_
#endif

#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// v (a whole vector of d) with its 128-bit blocks added in order: lane i = Σ_b v[4b + i]
// (((b0 + b1) + b2) + ...: float sums do not depend on how the target holds the blocks).
template <class D>
HWY_INLINE hn::Vec<hn::Full128<hn::TFromD<D>>> AddBlocks(D d, hn::Vec<D> v) {
  using T = hn::TFromD<D>;
#if HWY_HAVE_SCALABLE
  const hn::Full128<T> d4;
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(T);
  HWY_ALIGN T blocks[kMaxLanes];
  hn::Store(v, d, blocks);
  auto sum = hn::Load(d4, blocks);
  for (size_t b = 4; b < hn::Lanes(d); b += 4) sum = hn::Add(sum, hn::Load(d4, blocks + b));
  return sum;
#else
  constexpr size_t kBytes = hn::MaxLanes(d) * sizeof(T);
  static_assert(kBytes <= 64, "x86 and NEON vectors: up to 4 blocks");
  if constexpr (kBytes <= 16) {
    return v;
  } else {
    const hn::Half<D> dh;
    const auto lo = hn::LowerHalf(dh, v), hi = hn::UpperHalf(dh, v);
    if constexpr (kBytes == 32) {
      return hn::Add(lo, hi);
    } else {  // ((b0 + b1) + b2) + b3, the order of the loop above
      const hn::Half<decltype(dh)> dq;
      const auto b01 = hn::Add(hn::LowerHalf(dq, lo), hn::UpperHalf(dq, lo));
      return hn::Add(hn::Add(b01, hn::LowerHalf(dq, hi)), hn::UpperHalf(dq, hi));
    }
  }
#endif
}

// [Σ s[0], Σ s[1], Σ s[2], Σ s[3]]: the lane sums of a tile of 4 vectors of 32-bit lanes
// (vec_tile-inl.h). The four reductions share one tree (pairs of vectors interleaved and added
// per 128-bit block, then the blocks added) instead of four whole-vector reductions. Each sum's
// additions are the same whatever the other vectors hold.
template <class D, class Tile>
HWY_INLINE hn::Vec<hn::Full128<hn::TFromD<D>>> SumOfLanes4(D d, const Tile& s) {
  static_assert(sizeof(hn::TFromD<D>) == 4, "32-bit lanes");
  const hn::Repartition<uint64_t, D> d64;
  // Per block: [s0 + , s1 + , s0 + , s1 + ] (lanes 0+2 and 1+3 of each), same for s2, s3.
  const auto a01 = hn::Add(hn::InterleaveLower(d, s[0], s[1]), hn::InterleaveUpper(d, s[0], s[1]));
  const auto a23 = hn::Add(hn::InterleaveLower(d, s[2], s[3]), hn::InterleaveUpper(d, s[2], s[3]));
  // Per block: [Σ s0, Σ s1, Σ s2, Σ s3] over the block's 4 lanes.
  const auto lo = hn::BitCast(d, hn::InterleaveLower(d64, hn::BitCast(d64, a01), hn::BitCast(d64, a23)));
  const auto hi = hn::BitCast(d, hn::InterleaveUpper(d64, hn::BitCast(d64, a01), hn::BitCast(d64, a23)));
  return AddBlocks(d, hn::Add(lo, hi));
}

// [a, b, c, e] without a round trip through memory.
template <class D4>
HWY_INLINE hn::Vec<D4> FourLanes(D4 d4, hn::TFromD<D4> a, hn::TFromD<D4> b, hn::TFromD<D4> c,
                                 hn::TFromD<D4> e) {
  const auto ab = hn::InterleaveLower(d4, hn::Set(d4, a), hn::Set(d4, b));  // [a b a b]
  const auto ce = hn::InterleaveLower(d4, hn::Set(d4, c), hn::Set(d4, e));  // [c e c e]
  return hn::ConcatLowerLower(d4, ce, ab);
}
#endif  // HWY_TARGET != HWY_SCALAR

// out[0..4) = the lane sums of s[0..4) (SumOfLanes4 above; one lane each on HWY_SCALAR).
template <class D, class Tile>
HWY_INLINE void SumOfLanes4(D d, const Tile& s, hn::TFromD<D> out[4]) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  for (size_t h = 0; h < 4; ++h) out[h] = hn::GetLane(s[h]);
#else
  hn::StoreU(SumOfLanes4(d, s), hn::Full128<hn::TFromD<D>>(), out);
#endif
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_LANE_SUMS_INL_H_
