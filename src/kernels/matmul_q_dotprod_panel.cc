// Arm dot-product panel GEMMs of the dynamic-activation products for prefill-shaped inputs
// (R >= kDotprodMaxRows), called by MatMulQ8DynColumnsDotprod / MatMulQ4DynColumnsDotprod
// (matmul_q_dotprod.cc) once they have checked the CPU and the shapes.
//
// Why: the Highway NEON / SVE panels (matmul_dyn_panel-inl.h) widen both operands to int16 and
// issue widening multiply-adds, 8 products per instruction; `sdot` takes 16 byte products per
// instruction, and its by-element form (`vdotq_laneq_s32`) needs no reductions.
//
// Layout: a block of kM = 8 weight rows is unpacked once into a slab of quads, slab[k/4][kM][4]
// (Q8: the bytes; Q4: the codes q in 0..15), so one 16-byte load holds 4 weight rows' 4 weights
// at the same k. x stays as it is: one 16-byte load of an activation row holds 4 quads, and
// `vdotq_laneq_s32(acc, w, x, l)` adds, for each of the 4 weight rows, the dot of its quad with
// the row's quad l. The int32 lanes of a tile are (activation row j, weight rows m..m+3); the
// outputs of a row are contiguous in y, stored as vectors.
//
// On CPUs with the int8 matrix multiply (I8mmAvailable()) the tiles run on `smmla` instead, which
// multiplies a 2×8 block of bytes by the transpose of another into a 2×2 block of int32 (32
// products per instruction, twice `sdot`'s): the slab holds weight-row pairs, slab[k/8][kM/2][2][8],
// and the activations are repacked once per call into row pairs, xp[R/2][k/8][2][8]; the lanes of
// a tile are then (row pair) × (weight-row pair), moved into rows before the output code, which
// both tile kinds share.
//
// The outputs are formed exactly as the one-row tiles of matmul_q_dotprod.cc form them, so
// prefill and decode give the same bits:
//  - Q8: float(dot)·x_scale·w_scale + bias, unfused.
//  - Q4 (the 8da4w order of quant_kernels.h): per group in order, symmetric
//    acc = fma(float(dot_g − 8·Σ_g xq), scale_g, acc); asymmetric acc = fma(float(dot_g),
//    scale_g, acc), then acc = fma(float(Σ_g xq), offset_g, acc); y = fma(acc, x_scale, bias or 0).
//    dot_g here is Σ q·xq with the unsigned codes; the tiles compute Σ (q − 8)·xq: the same
//    integers.
// Speed unmeasured (no Arm hardware here; tested under qemu).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/dotprod_target.h"
#include "kernels/matmul_q_dotprod.h"

namespace slm::kernels {

#if SLM_HAVE_DOTPROD_KERNELS

namespace {

constexpr size_t kM = 8;    // weight rows per block: two int32 vectors of 4 lanes
constexpr size_t kP8 = 8;   // activation rows per Q8 tile: 16 int32 accumulators + 8 x + 2 w
constexpr size_t kP4 = 4;   // per Q4 tile: 8 int32 + 8 f32 accumulators + 4 x + 2 w

// Grow-only per-thread scratch: the slab, zero activation rows, the row pairs (smmla) and the
// block's per-row factors.
uint8_t* PanelScratch(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

// In place: r[i] lane j becomes r[j] lane i (a 4×4 transpose of 32-bit quads).
SLM_DOTPROD_TARGET inline void TransposeQuads4x4(int32x4_t (&r)[4]) {
  const int32x4_t t0 = vtrn1q_s32(r[0], r[1]), t1 = vtrn2q_s32(r[0], r[1]);
  const int32x4_t t2 = vtrn1q_s32(r[2], r[3]), t3 = vtrn2q_s32(r[2], r[3]);
  const auto lo = [](int32x4_t a, int32x4_t b) {
    return vreinterpretq_s32_s64(vtrn1q_s64(vreinterpretq_s64_s32(a), vreinterpretq_s64_s32(b)));
  };
  const auto hi = [](int32x4_t a, int32x4_t b) {
    return vreinterpretq_s32_s64(vtrn2q_s64(vreinterpretq_s64_s32(a), vreinterpretq_s64_s32(b)));
  };
  r[0] = lo(t0, t2);
  r[1] = lo(t1, t3);
  r[2] = hi(t0, t2);
  r[3] = hi(t1, t3);
}

// Stores quads q..q+3 of 4 weight rows (r[i] = row m0 + i's quads q..q+3) into the slab.
SLM_DOTPROD_TARGET inline void StoreQuads(int32x4_t (&r)[4], size_t q, size_t m0, int8_t* slab) {
  TransposeQuads4x4(r);
  for (size_t l = 0; l < 4; ++l) vst1q_s8(slab + ((q + l) * kM + m0) * 4, vreinterpretq_s8_s32(r[l]));
}

// slab[K/4][kM][4] = the bytes of Q8 rows w[rows, K] (K % 16 == 0), zero rows past `rows`.
SLM_DOTPROD_TARGET void UnpackQ8Block(const int8_t* w, size_t rows, size_t K, int8_t* slab) {
  for (size_t m0 = 0; m0 < kM; m0 += 4) {
    for (size_t k = 0; k < K; k += 16) {
      int32x4_t r[4];
      for (size_t i = 0; i < 4; ++i) {
        r[i] = m0 + i < rows ? vreinterpretq_s32_s8(vld1q_s8(w + (m0 + i) * K + k)) : vdupq_n_s32(0);
      }
      StoreQuads(r, k / 4, m0, slab);
    }
  }
}

// slab[K/4][kM][4] = the codes of Q4 rows w[rows, K/2] in k order (K % 32 == 0), zeros past `rows`.
SLM_DOTPROD_TARGET void UnpackQ4Block(const uint8_t* w, size_t rows, size_t K, int8_t* slab) {
  const uint8x16_t nibble = vdupq_n_u8(0x0F);
  for (size_t m0 = 0; m0 < kM; m0 += 4) {
    for (size_t b = 0; b < K / 32; ++b) {
      int32x4_t lo[4], hi[4];
      for (size_t i = 0; i < 4; ++i) {
        const uint8x16_t v = m0 + i < rows ? vld1q_u8(w + (m0 + i) * (K / 2) + 16 * b) : vdupq_n_u8(0);
        lo[i] = vreinterpretq_s32_u8(vandq_u8(v, nibble));  // k 32b .. 32b + 15
        hi[i] = vreinterpretq_s32_u8(vshrq_n_u8(v, 4));     // k 32b + 16 .. 32b + 31
      }
      StoreQuads(lo, 8 * b, m0, slab);
      StoreQuads(hi, 8 * b + 4, m0, slab);
    }
  }
}

// Lines of the next weight block to prefetch while the block's last tile computes, spread over
// its steps (the x86 panels measured 65% of a block's time waiting for an unprefetched unpack).
struct Prefetch {
  const uint8_t* next = nullptr;
  size_t bytes = 0;
  size_t step_bytes = 0;  // the block's bytes per tile step: kM rows' weights of one step

  void Step(size_t s) const {
    for (size_t line = s * step_bytes / 64; line < (s + 1) * step_bytes / 64 && line * 64 < bytes; ++line) {
      __builtin_prefetch(next + line * 64);
    }
  }
};

// d[j][h] += Σ over 16-k steps [s0, s1) of the slab's weight rows 4h..4h+3 against activation row
// x[j] (kP rows).
template <size_t kP>
SLM_DOTPROD_TARGET inline void PanelSteps(const int8_t* const* x, const int8_t* slab, size_t s0, size_t s1,
                                          int32x4_t (&d)[kP][2], const Prefetch& pf) {
  for (size_t s = s0; s < s1; ++s) {
    pf.Step(s);
    int8x16_t xv[kP];
    #pragma GCC unroll 16
    for (size_t j = 0; j < kP; ++j) xv[j] = vld1q_s8(x[j] + 16 * s);
    const int8_t* ws = slab + s * 4 * kM * 4;
#define SLM_DOTPROD_QUAD(l)                                                 \
  {                                                                         \
    const int8x16_t w0 = vld1q_s8(ws + (l) * kM * 4);                       \
    const int8x16_t w1 = vld1q_s8(ws + (l) * kM * 4 + 16);                  \
    _Pragma("GCC unroll 16") for (size_t j = 0; j < kP; ++j) {              \
      d[j][0] = vdotq_laneq_s32(d[j][0], w0, xv[j], l);                     \
      d[j][1] = vdotq_laneq_s32(d[j][1], w1, xv[j], l);                     \
    }                                                                       \
  }
    SLM_DOTPROD_QUAD(0)
    SLM_DOTPROD_QUAD(1)
    SLM_DOTPROD_QUAD(2)
    SLM_DOTPROD_QUAD(3)
#undef SLM_DOTPROD_QUAD
  }
}

// y[row, n .. n + cols) = v[0 .. cols) (cols <= kM).
SLM_DOTPROD_TARGET inline void StoreOutputs(const float32x4_t (&v)[2], size_t cols, float* y) {
  if (cols == kM) {
    vst1q_f32(y, v[0]);
    vst1q_f32(y + 4, v[1]);
    return;
  }
  float out[kM];
  vst1q_f32(out, v[0]);
  vst1q_f32(out + 4, v[1]);
  std::memcpy(y, out, cols * sizeof(float));
}

struct PanelArgs {
  const int8_t* xq;
  const float* xscale;
  const int32_t* group_sums;  // Q4
  const float* bias;
  float* y;
  size_t R, K, N, G;
  int8_t* slab;            // sdot: [K/4][kM][4]; smmla: [K/8][kM/2][2][8]
  const int8_t* zero_row;  // 2K zero bytes: activation rows (and row pairs) past R
  const int8_t* xpairs;    // smmla: the activations in row pairs, [R/2 rounded up][K/8][2][8]; else null
  float* scales;           // the block's, Q8 [kM]; Q4 [groups][kM]
  float* offsets;          // Q4 asymmetric: [groups][kM]
};

// The kP activation rows from r0 (zero_row past R).
template <size_t kP>
inline void TileRows(const PanelArgs& a, size_t r0, const int8_t* (&x)[kP]) {
  for (size_t j = 0; j < kP; ++j) x[j] = r0 + j < a.R ? a.xq + (r0 + j) * a.K : a.zero_row;
}

// The kXP row pairs from row r0 (even; zero_row past R).
template <size_t kXP>
inline void TilePairs(const PanelArgs& a, size_t r0, const int8_t* (&x)[kXP]) {
  for (size_t i = 0; i < kXP; ++i) x[i] = r0 + 2 * i < a.R ? a.xpairs + (r0 / 2 + i) * 2 * a.K : a.zero_row;
}

// ---- smmla: row pairs ----

// dst0 = [a[0..8), b[0..8)], dst1 = [a[8..16), b[8..16)]: two 8-k chunks of a row pair.
SLM_DOTPROD_TARGET inline void StoreChunkPairs(int8x16_t a, int8x16_t b, int8_t* dst0, int8_t* dst1) {
  vst1q_s8(dst0, vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b))));
  vst1q_s8(dst1, vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b))));
}

// xp[q][K/8][2][8] = rows 2q and 2q + 1 of xq[R, K] (K % 16 == 0), a zero row past R.
SLM_DOTPROD_TARGET void PackRowPairs(const int8_t* xq, size_t R, size_t K, int8_t* xp) {
  for (size_t q = 0; q < (R + 1) / 2; ++q) {
    int8_t* dst = xp + q * 2 * K;
    for (size_t k = 0; k < K; k += 16) {
      const int8x16_t a = vld1q_s8(xq + 2 * q * K + k);
      const int8x16_t b = 2 * q + 1 < R ? vld1q_s8(xq + (2 * q + 1) * K + k) : vdupq_n_s8(0);
      StoreChunkPairs(a, b, dst + 2 * k, dst + 2 * k + 16);
    }
  }
}

// slab[K/8][kM/2][2][8] = Q8 rows w[rows, K] in pairs, zero rows past `rows`.
SLM_DOTPROD_TARGET void UnpackQ8BlockPairs(const int8_t* w, size_t rows, size_t K, int8_t* slab) {
  for (size_t p = 0; p < kM / 2; ++p) {
    for (size_t k = 0; k < K; k += 16) {
      const int8x16_t a = 2 * p < rows ? vld1q_s8(w + 2 * p * K + k) : vdupq_n_s8(0);
      const int8x16_t b = 2 * p + 1 < rows ? vld1q_s8(w + (2 * p + 1) * K + k) : vdupq_n_s8(0);
      StoreChunkPairs(a, b, slab + ((k / 8) * (kM / 2) + p) * 16, slab + ((k / 8 + 1) * (kM / 2) + p) * 16);
    }
  }
}

// The same for the codes of Q4 rows w[rows, K/2] (K % 32 == 0).
SLM_DOTPROD_TARGET void UnpackQ4BlockPairs(const uint8_t* w, size_t rows, size_t K, int8_t* slab) {
  const uint8x16_t nibble = vdupq_n_u8(0x0F);
  for (size_t p = 0; p < kM / 2; ++p) {
    for (size_t b = 0; b < K / 32; ++b) {
      const uint8x16_t va = 2 * p < rows ? vld1q_u8(w + 2 * p * (K / 2) + 16 * b) : vdupq_n_u8(0);
      const uint8x16_t vb = 2 * p + 1 < rows ? vld1q_u8(w + (2 * p + 1) * (K / 2) + 16 * b) : vdupq_n_u8(0);
      const auto chunk = [&](size_t c) { return slab + (c * (kM / 2) + p) * 16; };
      StoreChunkPairs(vreinterpretq_s8_u8(vandq_u8(va, nibble)), vreinterpretq_s8_u8(vandq_u8(vb, nibble)),
                      chunk(4 * b), chunk(4 * b + 1));  // k 32b .. 32b + 15
      StoreChunkPairs(vreinterpretq_s8_u8(vshrq_n_u8(va, 4)), vreinterpretq_s8_u8(vshrq_n_u8(vb, 4)),
                      chunk(4 * b + 2), chunk(4 * b + 3));  // k 32b + 16 .. 32b + 31
    }
  }
}

// d[i][p] += Σ over 8-k chunks [c0, c1) of row pair x[i] × weight-row pair p: lanes (row 2i,
// weight 2p), (2i, 2p + 1), (2i + 1, 2p), (2i + 1, 2p + 1).
template <size_t kXP>
SLM_I8MM_TARGET inline void PairSteps(const int8_t* const* x, const int8_t* slab, size_t c0, size_t c1,
                                      int32x4_t (&d)[kXP][kM / 2], const Prefetch& pf) {
  for (size_t c = c0; c < c1; ++c) {
    pf.Step(c);
    int8x16_t wv[kM / 2];
    #pragma GCC unroll 16
    for (size_t p = 0; p < kM / 2; ++p) wv[p] = vld1q_s8(slab + (c * (kM / 2) + p) * 16);
    #pragma GCC unroll 16
    for (size_t i = 0; i < kXP; ++i) {
      const int8x16_t xv = vld1q_s8(x[i] + 16 * c);
      #pragma GCC unroll 16
      for (size_t p = 0; p < kM / 2; ++p) d[i][p] = vmmlaq_s32(d[i][p], xv, wv[p]);
    }
  }
}

// a[i][j] = v for a tile's register array.
template <class V, size_t kRows, size_t kCols>
inline void SetAll(V (&a)[kRows][kCols], V v) {
  #pragma GCC unroll 16
  for (size_t i = 0; i < kRows; ++i) {
    #pragma GCC unroll 16
    for (size_t j = 0; j < kCols; ++j) a[i][j] = v;
  }
}

// Pair lanes to rows: rows[2i][h] = row 2i's outputs for weight rows 4h..4h+3, rows[2i + 1] the
// odd row's.
template <class V, size_t kXP>
inline void PairsToRows(const V (&d)[kXP][kM / 2], V (&rows)[2 * kXP][2]) {
  #pragma GCC unroll 16
  for (size_t i = 0; i < kXP; ++i) {
    #pragma GCC unroll 16
    for (size_t h = 0; h < 2; ++h) {
      if constexpr (std::is_same_v<V, int32x4_t>) {
        rows[2 * i][h] = vcombine_s32(vget_low_s32(d[i][2 * h]), vget_low_s32(d[i][2 * h + 1]));
        rows[2 * i + 1][h] = vcombine_s32(vget_high_s32(d[i][2 * h]), vget_high_s32(d[i][2 * h + 1]));
      } else {
        rows[2 * i][h] = vcombine_f32(vget_low_f32(d[i][2 * h]), vget_low_f32(d[i][2 * h + 1]));
        rows[2 * i + 1][h] = vcombine_f32(vget_high_f32(d[i][2 * h]), vget_high_f32(d[i][2 * h + 1]));
      }
    }
  }
}

// ---- Q8 ----

// The outputs of kP rows from r0 from their exact dots d[j][h] (weight rows 4h..4h+3).
template <size_t kP>
SLM_DOTPROD_TARGET void Q8Outputs(const PanelArgs& a, size_t r0, size_t n, size_t cols, const int32x4_t (&d)[kP][2]) {
  const float32x4_t sc[2] = {vld1q_f32(a.scales), vld1q_f32(a.scales + 4)};
  float b8[kM] = {};
  for (size_t m = 0; m < cols && a.bias != nullptr; ++m) b8[m] = a.bias[n + m];
  const float32x4_t bias[2] = {vld1q_f32(b8), vld1q_f32(b8 + 4)};
  for (size_t j = 0; j < kP && r0 + j < a.R; ++j) {
    const float32x4_t xs = vdupq_n_f32(a.xscale[r0 + j]);
    float32x4_t v[2];
    for (size_t h = 0; h < 2; ++h) {
      v[h] = vmulq_f32(vmulq_f32(vcvtq_f32_s32(d[j][h]), xs), sc[h]);
      __asm__("" : "+w"(v[h]));  // no FMA contraction: the one-row tiles add the bias unfused
      if (a.bias != nullptr) v[h] = vaddq_f32(v[h], bias[h]);
    }
    StoreOutputs(v, cols, a.y + (r0 + j) * a.N + n);
  }
}

SLM_DOTPROD_TARGET void Q8Tile(const PanelArgs& a, size_t r0, size_t n, size_t cols, const Prefetch& pf) {
  const int8_t* x[kP8];
  TileRows(a, r0, x);
  int32x4_t d[kP8][2];
  #pragma GCC unroll 16
  for (size_t j = 0; j < kP8; ++j) d[j][0] = d[j][1] = vdupq_n_s32(0);
  PanelSteps<kP8>(x, a.slab, 0, a.K / 16, d, pf);
  Q8Outputs(a, r0, n, cols, d);
}

// kP8 rows as kP8 / 2 row pairs on smmla.
SLM_I8MM_TARGET void Q8PairTile(const PanelArgs& a, size_t r0, size_t n, size_t cols, const Prefetch& pf) {
  constexpr size_t kXP = kP8 / 2;
  const int8_t* x[kXP];
  TilePairs(a, r0, x);
  int32x4_t d[kXP][kM / 2];
  SetAll(d, vdupq_n_s32(0));
  PairSteps<kXP>(x, a.slab, 0, a.K / 8, d, pf);
  int32x4_t rows[kP8][2];
  PairsToRows(d, rows);
  Q8Outputs(a, r0, n, cols, rows);
}

SLM_DOTPROD_TARGET void Q8Block(const PanelArgs& a, const int8_t* w, const float* scales, size_t n, size_t n_end) {
  const size_t cols = std::min(kM, n_end - n);
  const bool pairs = a.xpairs != nullptr;
  if (pairs) UnpackQ8BlockPairs(w + n * a.K, cols, a.K, a.slab);
  else UnpackQ8Block(w + n * a.K, cols, a.K, a.slab);
  for (size_t m = 0; m < kM; ++m) a.scales[m] = m < cols ? scales[n + m] : 0.0f;
  const size_t next_cols = std::min(kM, n_end - n - cols);
  // Per step, kM rows' bytes of it: 16 k (sdot) or 8 k (smmla).
  const Prefetch next{reinterpret_cast<const uint8_t*>(w + (n + cols) * a.K), next_cols * a.K, kM * (pairs ? 8 : 16)};
  for (size_t r0 = 0; r0 < a.R; r0 += kP8) {
    const Prefetch& pf = r0 + kP8 >= a.R ? next : Prefetch{};
    if (pairs) Q8PairTile(a, r0, n, cols, pf);
    else Q8Tile(a, r0, n, cols, pf);
  }
}

// ---- Q4 ----

// The outputs of kP rows from r0 from their f32 group accumulators f[j][h].
template <size_t kP>
SLM_DOTPROD_TARGET void Q4Outputs(const PanelArgs& a, size_t r0, size_t n, size_t cols, const float32x4_t (&f)[kP][2]) {
  float b8[kM] = {};
  for (size_t m = 0; m < cols && a.bias != nullptr; ++m) b8[m] = a.bias[n + m];
  const float32x4_t bias[2] = {vld1q_f32(b8), vld1q_f32(b8 + 4)};
  for (size_t j = 0; j < kP && r0 + j < a.R; ++j) {
    const float32x4_t xs = vdupq_n_f32(a.xscale[r0 + j]);
    const float32x4_t v[2] = {vfmaq_f32(bias[0], f[j][0], xs), vfmaq_f32(bias[1], f[j][1], xs)};
    StoreOutputs(v, cols, a.y + (r0 + j) * a.N + n);
  }
}

// One group's fold of an exact dot d into f (the 8da4w order): gs = Σ_g xq of the lane's row.
template <bool kAsym>
SLM_DOTPROD_TARGET inline float32x4_t FoldGroup(float32x4_t f, int32x4_t d, int32x4_t gs, float32x4_t s,
                                                float32x4_t o) {
  if constexpr (kAsym) {
    f = vfmaq_f32(f, vcvtq_f32_s32(d), s);
    return vfmaq_f32(f, vcvtq_f32_s32(gs), o);
  } else {
    return vfmaq_f32(f, vcvtq_f32_s32(vsubq_s32(d, vshlq_n_s32(gs, 3))), s);
  }
}

// Σxq of group g of row r (0 past R).
inline int32_t GroupSum(const PanelArgs& a, size_t r, size_t g) {
  return r < a.R ? a.group_sums[r * (a.K / a.G) + g] : 0;
}

template <bool kAsym>
SLM_DOTPROD_TARGET void Q4Tile(const PanelArgs& a, size_t r0, size_t n, size_t cols, const Prefetch& pf) {
  const size_t groups = a.K / a.G, steps = a.G / 16;
  const int8_t* x[kP4];
  TileRows(a, r0, x);
  float32x4_t f[kP4][2];
  #pragma GCC unroll 16
  for (size_t j = 0; j < kP4; ++j) f[j][0] = f[j][1] = vdupq_n_f32(0.0f);
  for (size_t g = 0; g < groups; ++g) {
    int32x4_t d[kP4][2];
    #pragma GCC unroll 16
    for (size_t j = 0; j < kP4; ++j) d[j][0] = d[j][1] = vdupq_n_s32(0);
    PanelSteps<kP4>(x, a.slab, g * steps, (g + 1) * steps, d, pf);
    #pragma GCC unroll 16
    for (size_t h = 0; h < 2; ++h) {
      const float32x4_t s = vld1q_f32(a.scales + g * kM + 4 * h);
      const float32x4_t o = kAsym ? vld1q_f32(a.offsets + g * kM + 4 * h) : s;
      #pragma GCC unroll 16
      for (size_t j = 0; j < kP4; ++j) {
        f[j][h] = FoldGroup<kAsym>(f[j][h], d[j][h], vdupq_n_s32(GroupSum(a, r0 + j, g)), s, o);
      }
    }
  }
  Q4Outputs(a, r0, n, cols, f);
}

// kP4 rows as kP4 / 2 row pairs on smmla; lanes (row, weight row) as PairSteps leaves them.
template <bool kAsym>
SLM_I8MM_TARGET void Q4PairTile(const PanelArgs& a, size_t r0, size_t n, size_t cols, const Prefetch& pf) {
  constexpr size_t kXP = kP4 / 2;
  const size_t groups = a.K / a.G, chunks = a.G / 8;
  const int8_t* x[kXP];
  TilePairs(a, r0, x);
  float32x4_t f[kXP][kM / 2];
  SetAll(f, vdupq_n_f32(0.0f));
  for (size_t g = 0; g < groups; ++g) {
    int32x4_t d[kXP][kM / 2];
    SetAll(d, vdupq_n_s32(0));
    PairSteps<kXP>(x, a.slab, g * chunks, (g + 1) * chunks, d, pf);
    #pragma GCC unroll 16
    for (size_t p = 0; p < kM / 2; ++p) {
      const float32x2_t s2 = vld1_f32(a.scales + g * kM + 2 * p);
      const float32x4_t s = vcombine_f32(s2, s2);  // weight rows 2p, 2p + 1, 2p, 2p + 1
      float32x4_t o = s;
      if constexpr (kAsym) {
        const float32x2_t o2 = vld1_f32(a.offsets + g * kM + 2 * p);
        o = vcombine_f32(o2, o2);
      }
      #pragma GCC unroll 16
      for (size_t i = 0; i < kXP; ++i) {
        const int32x4_t gs = vcombine_s32(vdup_n_s32(GroupSum(a, r0 + 2 * i, g)), vdup_n_s32(GroupSum(a, r0 + 2 * i + 1, g)));
        f[i][p] = FoldGroup<kAsym>(f[i][p], d[i][p], gs, s, o);
      }
    }
  }
  float32x4_t rows[kP4][2];
  PairsToRows(f, rows);
  Q4Outputs(a, r0, n, cols, rows);
}

template <bool kAsym>
SLM_DOTPROD_TARGET void Q4Block(const PanelArgs& a, const uint8_t* w, const float* scales, const float* offsets,
                                size_t n, size_t n_end) {
  const size_t groups = a.K / a.G, cols = std::min(kM, n_end - n);
  const bool pairs = a.xpairs != nullptr;
  if (pairs) UnpackQ4BlockPairs(w + n * (a.K / 2), cols, a.K, a.slab);
  else UnpackQ4Block(w + n * (a.K / 2), cols, a.K, a.slab);
  for (size_t g = 0; g < groups; ++g) {
    for (size_t m = 0; m < kM; ++m) {
      a.scales[g * kM + m] = m < cols ? scales[(n + m) * groups + g] : 0.0f;
      if constexpr (kAsym) a.offsets[g * kM + m] = m < cols ? offsets[(n + m) * groups + g] : 0.0f;
    }
  }
  const size_t next_cols = std::min(kM, n_end - n - cols);
  const Prefetch next{w + (n + cols) * (a.K / 2), next_cols * (a.K / 2), kM * (pairs ? 4 : 8)};
  for (size_t r0 = 0; r0 < a.R; r0 += kP4) {
    const Prefetch& pf = r0 + kP4 >= a.R ? next : Prefetch{};
    if (pairs) Q4PairTile<kAsym>(a, r0, n, cols, pf);
    else Q4Tile<kAsym>(a, r0, n, cols, pf);
  }
}

// Scratch of one call: slab, zero rows, the row pairs (smmla), the block's scales and offsets.
PanelArgs Scratch(const int8_t* xq, const float* xscale, const int32_t* group_sums, const float* bias, float* y,
                  size_t R, size_t K, size_t N, size_t G, size_t factors) {
  const bool pairs = I8mmAvailable();
  const size_t slab = K * kM, zero = 2 * K, xp = pairs ? (R + 1) / 2 * 2 * K : 0, floats = factors * sizeof(float);
  uint8_t* s = PanelScratch(slab + zero + xp + 2 * floats + 16);
  // The float arrays after the byte arrays, 16-byte aligned (every byte array is a multiple of 16).
  float* scales = reinterpret_cast<float*>(s + slab + zero + xp);
  std::memset(s + slab, 0, zero);
  int8_t* xpairs = pairs ? reinterpret_cast<int8_t*>(s + slab + zero) : nullptr;
  if (pairs) PackRowPairs(xq, R, K, xpairs);
  return PanelArgs{xq, xscale, group_sums, bias, y, R, K, N, G, reinterpret_cast<int8_t*>(s),
                   reinterpret_cast<int8_t*>(s + slab), xpairs, scales, scales + factors};
}

}  // namespace

void MatMulQ8DynPanelDotprod(const int8_t* xq, const float* xscale, const int8_t* w, const float* scales,
                             const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t n_begin,
                             int64_t n_end) {
  const PanelArgs a = Scratch(xq, xscale, nullptr, bias, y, size_t(R), size_t(K), size_t(N), 1, kM);
  for (size_t n = size_t(n_begin); n < size_t(n_end); n += kM) Q8Block(a, w, scales, n, size_t(n_end));
}

void MatMulQ4DynPanelDotprod(const int8_t* xq, const float* xscale, const int32_t* group_sums, const uint8_t* w,
                             const float* scales, const float* offsets, const float* bias, float* y, int64_t R,
                             int64_t K, int64_t N, int64_t G, int64_t n_begin, int64_t n_end) {
  const size_t groups = size_t(K / G);
  const PanelArgs a = Scratch(xq, xscale, group_sums, bias, y, size_t(R), size_t(K), size_t(N), size_t(G),
                              groups * kM);
  for (size_t n = size_t(n_begin); n < size_t(n_end); n += kM) {
    if (offsets != nullptr) Q4Block<true>(a, w, scales, offsets, n, size_t(n_end));
    else Q4Block<false>(a, w, scales, nullptr, n, size_t(n_end));
  }
}

#endif  // SLM_HAVE_DOTPROD_KERNELS

}  // namespace slm::kernels
