// Arm dot-product bodies of the weight-only decode products (R < kQ4SplitXMaxRows rows of f32 x,
// int4 and int8 weights): the split-x method of matmul_q4_split_x.cc on `sdot`. The dispatch of
// MatMulQ4Columns / MatMulQ8Columns tries them ahead of the Highway bodies on aarch64 CPUs with
// the dot product (SLM_DISABLE_DOTPROD=1 turns them off).
//
// Why: the Highway NEON body dequantizes every weight to f32 and multiplies it with x: per 8 int4
// weights two widenings, a mask, a shift, two conversions and four multiply-adds, 1.25
// instructions per weight, more than a phone core's memory stream needs. Here x is split into
// three int8 parts and every 32 weights cost 6 `sdot` (+ 4 unpack operations for int4), about 0.4
// instructions per weight. Speed unmeasured (no Arm hardware here; tested under qemu).
//
// x is split per 32-value block b (split once per call and row, shared by every weight row): lane
// i of an `sdot` against the block's two halves covers x[32b + 4i .. +3] and x[32b + 16 + 4i ..
// +3]; each lane has its own scale s = max|x| / 127 over its 8 values, t = x / s, and the parts are
// q1 = round(t), q2 = round(128·(t − q1)), q3 = round(128·(128·(t − q1) − q2)) (|q2|, |q3| ≤ 64):
// x = s·(q1 + q2/128 + q3/16384) to within s·2⁻¹⁵ (2⁻²² of the lane's largest |x|), as on x86.
// The weights are signed bytes (int4: q − 8; int8 as stored), so the accumulator takes part 1,
// is shifted left 7, takes part 2, shifted, part 3: 16384·Σ w·(q1 + q2/128 + q3/16384) exactly
// (int8: |lane| ≤ 8·127·2 089 216 < 2³¹), then × its lane's x scale / 16384 × the weight scale.
// int4 asymmetric groups add Σ_g (offset_g + 8·scale_g)·Σ_{k∈g} x per row. A NaN or an infinity
// in x makes its lane's scale NaN, so the outputs it touches are NaN, as in f32.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/decode_prefetch.h"
#include "kernels/dotprod_target.h"
#include "kernels/matmul_q4_split_x.h"
#include "kernels/matmul_q_dotprod.h"

namespace slm::kernels {

#if SLM_HAVE_DOTPROD_KERNELS

namespace {

constexpr size_t kBlock = 32;
constexpr size_t kBlockPartBytes = 3 * kBlock;  // parts 1..3, each x[32b .. 32b + 32) in order

// One x row split for the tiles: parts[b·96 + 32p + j] (part p + 1 of x[32b + j]),
// lane_scales[4b + i] (s / 16384 of lane i; NaN where its x has a NaN or an infinity) and, for
// int4 asymmetric groups, xg[g] = Σ_{k∈g} x.
struct SplitRow {
  int8_t* parts;
  float* lane_scales;
  float* xg;
};

// int8x16 of the 16 int32 lanes of a[0..4).
SLM_DOTPROD_TARGET inline int8x16_t Narrow(const int32x4_t (&a)[4]) {
  const int16x8_t lo = vcombine_s16(vmovn_s32(a[0]), vmovn_s32(a[1]));
  const int16x8_t hi = vcombine_s16(vmovn_s32(a[2]), vmovn_s32(a[3]));
  return vcombine_s8(vmovn_s16(lo), vmovn_s16(hi));
}

SLM_DOTPROD_TARGET void SplitX(const float* x, size_t K, const SplitRow& s) {
  const float32x4_t step = vdupq_n_f32(128.0f);
  for (size_t b = 0; b < K / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    int32x4_t q[3][2][4];  // [part][half][lane]
    #pragma GCC unroll 16
    for (size_t i = 0; i < 4; ++i) {
      const float32x4_t lo = vld1q_f32(xb + 4 * i), hi = vld1q_f32(xb + 16 + 4 * i);
      // Non-finite: |v| is not below infinity (NaN compares false).
      const uint32x4_t finite = vandq_u32(vcltq_f32(vabsq_f32(lo), vdupq_n_f32(std::numeric_limits<float>::infinity())),
                                          vcltq_f32(vabsq_f32(hi), vdupq_n_f32(std::numeric_limits<float>::infinity())));
      const bool bad = vminvq_u32(finite) == 0;
      const float m = vmaxvq_f32(vmaxq_f32(vabsq_f32(lo), vabsq_f32(hi)));
      const float scale = m * (1.0f / 127.0f);  // x / s: 127 / m would overflow for tiny m
      s.lane_scales[4 * b + i] = bad ? std::numeric_limits<float>::quiet_NaN() : scale * (1.0f / 16384.0f);
      const bool zero = bad || !(m > 0.0f);
      const float32x4_t vs = vdupq_n_f32(zero ? 1.0f : scale);
      #pragma GCC unroll 16
      for (size_t h = 0; h < 2; ++h) {
        const float32x4_t t = zero ? vdupq_n_f32(0.0f) : vdivq_f32(h == 0 ? lo : hi, vs);
        const float32x4_t q1 = vrndnq_f32(t);
        const float32x4_t r1 = vmulq_f32(vsubq_f32(t, q1), step);  // both steps exact
        const float32x4_t q2 = vrndnq_f32(r1);
        const float32x4_t q3 = vrndnq_f32(vmulq_f32(vsubq_f32(r1, q2), step));
        q[0][h][i] = vcvtq_s32_f32(q1);
        q[1][h][i] = vcvtq_s32_f32(q2);
        q[2][h][i] = vcvtq_s32_f32(q3);
      }
    }
    for (size_t p = 0; p < 3; ++p) {
      for (size_t h = 0; h < 2; ++h) vst1q_s8(s.parts + b * kBlockPartBytes + 32 * p + 16 * h, Narrow(q[p][h]));
    }
  }
}

// The signed weights of block b of one row, in the halves the x parts use: x[32b .. +16) and
// x[32b + 16 .. +32).
struct Q4Weights {
  static constexpr size_t kRowBytes(size_t K) { return K / 2; }
  SLM_DOTPROD_TARGET static inline void Load(const uint8_t* row, size_t b, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t v = vld1q_u8(row + 16 * b);
    lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
    hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
  }
};
struct Q8Weights {
  static constexpr size_t kRowBytes(size_t K) { return K; }
  SLM_DOTPROD_TARGET static inline void Load(const uint8_t* row, size_t b, int8x16_t& lo, int8x16_t& hi) {
    lo = vld1q_s8(reinterpret_cast<const int8_t*>(row) + 32 * b);
    hi = vld1q_s8(reinterpret_cast<const int8_t*>(row) + 32 * b + 16);
  }
};

// y[0..kN) = one split x row against kN weight rows streamed together (+ bias). Q4: scales [kN,
// K/G] per group, offsets likewise or null; Q8: scales [kN] per row, G = K.
template <class W, int kN>
SLM_DOTPROD_TARGET inline void Tile(const SplitRow& sx, const uint8_t* w, const float* scales, const float* offsets,
                                    const float* bias, float* y, size_t K, size_t G) {
  const size_t row_bytes = W::kRowBytes(K), groups = K / G, blocks_per_group = G / kBlock;
  const size_t block_bytes = row_bytes / (K / kBlock), blocks_per_line = 64 / block_bytes;
  float32x4_t acc[kN];
  #pragma GCC unroll 16
  for (int r = 0; r < kN; ++r) acc[r] = vdupq_n_f32(0.0f);
  for (size_t b = 0; b < K / kBlock; ++b) {
    const int8_t* p = sx.parts + b * kBlockPartBytes;
    const int8x16_t x1l = vld1q_s8(p), x1h = vld1q_s8(p + 16), x2l = vld1q_s8(p + 32);
    const int8x16_t x2h = vld1q_s8(p + 48), x3l = vld1q_s8(p + 64), x3h = vld1q_s8(p + 80);
    const float32x4_t ls = vld1q_f32(sx.lane_scales + 4 * b);
    const size_t g = b / blocks_per_group;
    #pragma GCC unroll 16
    for (int r = 0; r < kN; ++r) {
      const uint8_t* row = w + r * row_bytes;
      if (b % blocks_per_line == 0) PrefetchDecodeLine(row + kN * row_bytes + b * block_bytes);  // the next tile's row
      int8x16_t lo, hi;
      W::Load(row, b, lo, hi);
      int32x4_t d = vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, x1l), hi, x1h);
      d = vdotq_s32(vdotq_s32(vshlq_n_s32(d, 7), lo, x2l), hi, x2h);
      d = vdotq_s32(vdotq_s32(vshlq_n_s32(d, 7), lo, x3l), hi, x3h);
      const float ws = scales[r * groups + g];  // Q8: groups = 1, g = 0
      acc[r] = vfmaq_f32(acc[r], vcvtq_f32_s32(d), vmulq_n_f32(ls, ws));
    }
  }
  for (int r = 0; r < kN; ++r) {
    float dot = vaddvq_f32(acc[r]);
    if (offsets != nullptr) {  // Σ_g (o_g + 8·s_g)·Σ_{k∈g} x
      const float* sr = scales + r * groups;
      const float* orow = offsets + r * groups;
      float term = 0.0f;
      for (size_t gg = 0; gg < groups; ++gg) term += (orow[gg] + 8.0f * sr[gg]) * sx.xg[gg];
      dot += term;
    }
    y[r] = bias ? dot + bias[r] : dot;
  }
}

// Grow-only per-thread scratch for the split row.
SplitRow Scratch(size_t K, size_t groups) {
  thread_local std::vector<uint8_t> buf;
  const size_t blocks = K / kBlock;
  const size_t bytes = blocks * (kBlockPartBytes + 4 * sizeof(float)) + groups * sizeof(float) + 16;
  if (buf.size() < bytes) buf.resize(bytes);
  float* lane_scales = reinterpret_cast<float*>(buf.data());
  float* xg = lane_scales + 4 * blocks;
  return SplitRow{reinterpret_cast<int8_t*>(xg + groups), lane_scales, xg};
}

// Rows of x one at a time: split, then tiles of 4 weight rows and single rows after them.
template <class W>
SLM_DOTPROD_TARGET void Rows(const float* x, const uint8_t* w, const float* scales, const float* offsets,
                             const float* bias, float* y, size_t R, size_t K, size_t N, size_t G, size_t n_begin,
                             size_t n_end) {
  const size_t groups = K / G, row_bytes = W::kRowBytes(K);  // Q8: G = K, one scale per row
  const SplitRow sx = Scratch(K, groups);
  for (size_t r = 0; r < R; ++r) {
    const float* xr = x + r * K;
    SplitX(xr, K, sx);
    if (offsets != nullptr) {
      for (size_t g = 0; g < groups; ++g) {
        float32x4_t sum = vdupq_n_f32(0.0f);
        for (size_t k = g * G; k < (g + 1) * G; k += 4) sum = vaddq_f32(sum, vld1q_f32(xr + k));
        sx.xg[g] = vaddvq_f32(sum);
      }
    }
    size_t c = n_begin;
    for (; c + 4 <= n_end; c += 4) {
      Tile<W, 4>(sx, w + c * row_bytes, scales + c * groups, offsets ? offsets + c * groups : nullptr,
                 bias ? bias + c : nullptr, y + r * N + c, K, G);
    }
    for (; c < n_end; ++c) {
      Tile<W, 1>(sx, w + c * row_bytes, scales + c * groups, offsets ? offsets + c * groups : nullptr,
                 bias ? bias + c : nullptr, y + r * N + c, K, G);
    }
  }
}

}  // namespace

bool MatMulQ4ColumnsSplitXDotprod(const float* x, const uint8_t* w, const float* scales, const float* offsets,
                                  const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                                  int64_t n_begin, int64_t n_end) {
  if (R >= kQ4SplitXMaxRows || K % 32 != 0 || G % 32 != 0 || !DotprodAvailable()) return false;
  Rows<Q4Weights>(x, w, scales, offsets, bias, y, size_t(R), size_t(K), size_t(N), size_t(G), size_t(n_begin),
                  size_t(n_end));
  return true;
}

bool MatMulQ8ColumnsSplitXDotprod(const float* x, const int8_t* w, const float* scales, const float* bias, float* y,
                                  int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  if (R >= kQ4SplitXMaxRows || K % 32 != 0 || !DotprodAvailable()) return false;
  Rows<Q8Weights>(x, reinterpret_cast<const uint8_t*>(w), scales, nullptr, bias, y, size_t(R), size_t(K), size_t(N),
                  size_t(K), size_t(n_begin), size_t(n_end));
  return true;
}

#else  // !SLM_HAVE_DOTPROD_KERNELS

bool MatMulQ4ColumnsSplitXDotprod(const float*, const uint8_t*, const float*, const float*, const float*, float*,
                                  int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) {
  return false;
}
bool MatMulQ8ColumnsSplitXDotprod(const float*, const int8_t*, const float*, const float*, float*, int64_t, int64_t,
                                  int64_t, int64_t, int64_t) {
  return false;
}

#endif  // SLM_HAVE_DOTPROD_KERNELS

}  // namespace slm::kernels
