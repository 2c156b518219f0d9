// Register tiles of SIMD vectors for the kernels' unrolled loops:
//   SLM_VEC_TILE(V, xv, kR);           // xv[r]: kR vectors of type V
//   SLM_VEC_TILE2(V, acc, kR, kN);     // acc[r][c]: kR × kN vectors
//
// Fixed-size targets (x86, NEON, scalar): plain arrays, `V xv[kR]`. Scalable targets (SVE, RVV):
// their vectors are sizeless types, which C++ does not allow as array elements or struct
// members, so the tile is up to 16 named locals behind a small table of their addresses with the
// same indexing syntax. The kernels index tiles only inside fully unrolled loops (HWY_UNROLL over
// constant trip counts), where every index is a constant and each `xv[r]` resolves to one local,
// which then lives in a register like an array element does.
//
// Included from the per-target kernel files once per Highway target: HWY_HAVE_SCALABLE is the
// target's, so the macros are redefined on every pass (no include guard).
#include <cstddef>

#include "hwy/highway.h"

#ifndef SLM_KERNELS_VEC_TILE_TYPES_
#define SLM_KERNELS_VEC_TILE_TYPES_
namespace slm::kernels {

// tile[i] of a scalable tile: the i-th of the locals whose addresses `v` holds.
template <class V>
struct SizelessTile {
  V* v[16];
  HWY_INLINE V& operator[](size_t i) const { return *v[i]; }
};

// tile[r][c] of a scalable rows × kCols tile (locals in row-major order).
template <class V, size_t kCols>
struct SizelessTile2 {
  struct Row {
    V* const* v;
    HWY_INLINE V& operator[](size_t c) const { return *v[c]; }
  };
  SizelessTile<V> flat;
  HWY_INLINE Row operator[](size_t r) const { return Row{flat.v + r * kCols}; }
};

}  // namespace slm::kernels
#endif  // SLM_KERNELS_VEC_TILE_TYPES_

#undef SLM_VEC_TILE
#undef SLM_VEC_TILE2
#undef SLM_VEC_TILE_LOCALS
#undef SLM_VEC_TILE_ADDRESSES
#if HWY_HAVE_SCALABLE
#define SLM_VEC_TILE_LOCALS(V, name, n)                                                         \
  static_assert((n) >= 1 && (n) <= 16, "a scalable-vector tile holds 1 to 16 vectors");       \
  V name##_0, name##_1, name##_2, name##_3, name##_4, name##_5, name##_6, name##_7, name##_8,  \
      name##_9, name##_10, name##_11, name##_12, name##_13, name##_14, name##_15
#define SLM_VEC_TILE_ADDRESSES(name)                                                           \
  {&name##_0, &name##_1, &name##_2, &name##_3, &name##_4, &name##_5, &name##_6, &name##_7,     \
   &name##_8, &name##_9, &name##_10, &name##_11, &name##_12, &name##_13, &name##_14, &name##_15}
#define SLM_VEC_TILE(V, name, n)   \
  SLM_VEC_TILE_LOCALS(V, name, n); \
  const ::slm::kernels::SizelessTile<V> name{SLM_VEC_TILE_ADDRESSES(name)}
#define SLM_VEC_TILE2(V, name, rows, cols)   \
  SLM_VEC_TILE_LOCALS(V, name, (rows) * (cols)); \
  const ::slm::kernels::SizelessTile2<V, cols> name{{SLM_VEC_TILE_ADDRESSES(name)}}
#else
#define SLM_VEC_TILE(V, name, n) V name[n]
#define SLM_VEC_TILE2(V, name, rows, cols) V name[rows][cols]
#endif
