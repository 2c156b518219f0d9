// Arm dot-product bodies of the dynamic-activation products for decode (R < kDotprodMaxRows):
// `sdot` multiplies 16 signed bytes by 16 signed bytes and adds them in groups of 4 into 4 int32
// lanes, one instruction for what the Highway NEON bodies do with widening multiply-adds. Written
// with intrinsics (dotprod_target.h). From kDotprodMaxRows rows on, the functions below hand the
// product to the panel GEMMs of matmul_q_dotprod_panel.cc.
//
// Both products form their outputs exactly as the panel GEMMs that run the prefill chunks (and
// as the Highway bodies, quant_kernels.h), so prefill and decode give the same bits:
//  - Q8: the exact int32 dot of w and xq (both signed: no bias correction), then
//    float(dot)·x_scale·w_scale + bias, unfused, as Q8DynOutput.
//  - Q4: a 16-byte block holds 32 weights, byte j = q[j] | q[16 + j] << 4. Low and high nibbles
//    become q − 8 as signed bytes, and two `sdot` against xq[0..16) and xq[16..32) give the
//    block's exact Σ (q − 8)·xq in 4 lanes; 4 weight rows' lanes are reduced at once to per-row
//    block dots, combined into group dots (+ 8·Σxq for asymmetric groups: the dot of q) and
//    folded in group order: acc = fma(float(dot_g), scale_g, acc) (+ fma(float(Σ_g xq),
//    offset_g, acc)), y = fma(acc, x_scale, bias or 0).
// Speed unmeasured (no Arm hardware here; tested under qemu).
#include "kernels/matmul_q_dotprod.h"

#include <type_traits>

#include "kernels/cpu_feature.h"
#include "kernels/decode_prefetch.h"
#include "kernels/dotprod_target.h"

#if SLM_HAVE_DOTPROD_KERNELS
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#endif

namespace slm::kernels {

namespace {
bool CpuHasDotprod() {
#if SLM_HAVE_DOTPROD_KERNELS
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}
bool CpuHasI8mm() {
#if SLM_HAVE_DOTPROD_KERNELS
  return (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#else
  return false;
#endif
}
CpuFeature dotprod(CpuHasDotprod, "SLM_DISABLE_DOTPROD");
CpuFeature i8mm(CpuHasI8mm, "SLM_DISABLE_I8MM");
}  // namespace

bool DotprodAvailable() { return dotprod.Available(); }
void SetDotprodEnabledForTest(bool enabled) { dotprod.SetEnabledForTest(enabled); }
bool I8mmAvailable() { return dotprod.Available() && i8mm.Available(); }
void SetI8mmEnabledForTest(bool enabled) { i8mm.SetEnabledForTest(enabled); }

#if SLM_HAVE_DOTPROD_KERNELS

namespace {

// Per lane j: Σ of the 4 lanes of t[j] (four reductions at once).
SLM_DOTPROD_TARGET inline int32x4_t LaneSums4(int32x4_t t0, int32x4_t t1, int32x4_t t2, int32x4_t t3) {
  return vpaddq_s32(vpaddq_s32(t0, t1), vpaddq_s32(t2, t3));
}

// One row of xq × kN weight rows (4 or 1); K % 16 == 0.
template <int kN>
SLM_DOTPROD_TARGET inline void Q8Tile(const int8_t* xq, float xscale, const int8_t* w, const float* scales,
                                      const float* bias, float* y, size_t K) {
  int32x4_t acc[kN];
  #pragma GCC unroll 16
  for (int c = 0; c < kN; ++c) acc[c] = vdupq_n_s32(0);
  for (size_t k = 0; k < K; k += 16) {
    const int8x16_t xv = vld1q_s8(xq + k);
    #pragma GCC unroll 16
    for (int c = 0; c < kN; ++c) {
      if (k % 64 == 0) PrefetchDecodeLine(w + (c + kN) * K + k);  // the next tile's row
      acc[c] = vdotq_s32(acc[c], vld1q_s8(w + c * K + k), xv);
    }
  }
  #pragma GCC unroll 16
  for (int c = 0; c < kN; ++c) {
    float v = float(vaddvq_s32(acc[c])) * xscale * scales[c];
    __asm__("" : "+w"(v));  // keeps GCC from contracting the add below into an FMA (Q8DynOutput does not)
    y[c] = bias ? v + bias[c] : v;
  }
}

// One row of xq × kN weight rows (4 or 1); K % 32 == 0, G % 32 == 0; gs: the row's [K / G] Σxq.
template <int kN>
SLM_DOTPROD_TARGET inline void Q4Tile(const int8_t* xq, float xscale, const int32_t* gs, const uint8_t* w,
                                      const float* scales, const float* offsets, const float* bias, float* y,
                                      size_t K, size_t G) {
  const size_t groups = K / G, row_bytes = K / 2, blocks_per_group = G / 32;
  const uint8x16_t nibble = vdupq_n_u8(0x0F);
  const int8x16_t eight = vdupq_n_s8(8);
  float32x4_t acc = vdupq_n_f32(0.0f);  // lane j: weight row j
  int32x4_t group_dot = vdupq_n_s32(0);
  const auto lanes = [&](const float* v, size_t g) {
    float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int j = 0; j < kN; ++j) l[j] = v[j * groups + g];
    return vld1q_f32(l);
  };
  for (size_t b = 0, g = 0, in_group = 0; b < K / 32; ++b) {
    const int8x16_t xl = vld1q_s8(xq + 32 * b), xh = vld1q_s8(xq + 32 * b + 16);
    int32x4_t t[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    #pragma GCC unroll 16
    for (int j = 0; j < kN; ++j) {
      const uint8_t* wb = w + j * row_bytes + 16 * b;
      if (b % 4 == 0) PrefetchDecodeLine(wb + kN * row_bytes);  // the next tile's row
      const uint8x16_t v = vld1q_u8(wb);
      const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, nibble)), eight);
      const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
      t[j] = vdotq_s32(vdotq_s32(t[j], lo, xl), hi, xh);
    }
    group_dot = vaddq_s32(group_dot, LaneSums4(t[0], t[1], t[2], t[3]));
    if (++in_group == blocks_per_group) {
      if (offsets == nullptr) {
        acc = vfmaq_f32(acc, vcvtq_f32_s32(group_dot), lanes(scales, g));
      } else {  // the dot of q = that of q − 8, + 8·Σxq
        const int32x4_t s = vdupq_n_s32(gs[g]);
        acc = vfmaq_f32(acc, vcvtq_f32_s32(vaddq_s32(group_dot, vshlq_n_s32(s, 3))), lanes(scales, g));
        acc = vfmaq_f32(acc, vcvtq_f32_s32(s), lanes(offsets, g));
      }
      group_dot = vdupq_n_s32(0);
      in_group = 0;
      ++g;
    }
  }
  float b4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int j = 0; j < kN && bias != nullptr; ++j) b4[j] = bias[j];
  float out[4];
  vst1q_f32(out, vfmaq_f32(vld1q_f32(b4), acc, vdupq_n_f32(xscale)));
  for (int j = 0; j < kN; ++j) y[j] = out[j];
}

SLM_DOTPROD_TARGET double DotprodDotLoopBody(int64_t iters, int32_t* sink) {
  int32x4_t acc[12];
  const int8x16_t a = vdupq_n_s8(3), b = vdupq_n_s8(-5);
  for (int j = 0; j < 12; ++j) acc[j] = vdupq_n_s32(j);
  for (int64_t i = 0; i < iters; ++i) {
    #pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = vdotq_s32(acc[j], a, b);
  }
  int32x4_t s = acc[0];
  for (int j = 1; j < 12; ++j) s = vaddq_s32(s, acc[j]);
  *sink = vaddvq_s32(s);
  return double(iters) * 12 * 16 * 2;
}

SLM_I8MM_TARGET double I8mmDotLoopBody(int64_t iters, int32_t* sink) {
  int32x4_t acc[12];
  const int8x16_t a = vdupq_n_s8(3), b = vdupq_n_s8(-5);
  for (int j = 0; j < 12; ++j) acc[j] = vdupq_n_s32(j);
  for (int64_t i = 0; i < iters; ++i) {
    #pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = vmmlaq_s32(acc[j], a, b);
  }
  int32x4_t s = acc[0];
  for (int j = 1; j < 12; ++j) s = vaddq_s32(s, acc[j]);
  *sink = vaddvq_s32(s);
  return double(iters) * 12 * 32 * 2;
}

}  // namespace

double DotprodDotLoop(int64_t iters, int32_t* sink) {
  if (!DotprodAvailable()) return 0;
  return DotprodDotLoopBody(iters, sink);
}

double I8mmDotLoop(int64_t iters, int32_t* sink) {
  if (!I8mmAvailable()) return 0;
  return I8mmDotLoopBody(iters, sink);
}

bool MatMulQ8DynColumnsDotprod(const int8_t* xq, const float* xscale, const int8_t* w,
                               const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                               int64_t N, int64_t n_begin, int64_t n_end) {
  if (K % 16 != 0 || !DotprodAvailable()) return false;
  if (R >= kDotprodMaxRows) {
    MatMulQ8DynPanelDotprod(xq, xscale, w, scales, bias, y, R, K, N, n_begin, n_end);
    return true;
  }
  for (int64_t r = 0; r < R; ++r) {
    int64_t c = n_begin;
    for (; c + 4 <= n_end; c += 4) {
      Q8Tile<4>(xq + r * K, xscale[r], w + c * K, scales + c, bias ? bias + c : nullptr, y + r * N + c, size_t(K));
    }
    for (; c < n_end; ++c) {
      Q8Tile<1>(xq + r * K, xscale[r], w + c * K, scales + c, bias ? bias + c : nullptr, y + r * N + c, size_t(K));
    }
  }
  return true;
}

bool MatMulQ4DynColumnsDotprod(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                               const uint8_t* w, const float* scales, const float* offsets,
                               const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                               int64_t n_begin, int64_t n_end) {
  if (K % 32 != 0 || G % 32 != 0 || !DotprodAvailable()) return false;
  if (R >= kDotprodMaxRows) {
    MatMulQ4DynPanelDotprod(xq, xscale, group_sums, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end);
    return true;
  }
  const int64_t groups = K / G, row_bytes = K / 2;
  for (int64_t r = 0; r < R; ++r) {
    const auto tile = [&](auto n, int64_t c) {
      Q4Tile<decltype(n)::value>(xq + r * K, xscale[r], group_sums + r * groups, w + c * row_bytes,
                                 scales + c * groups, offsets ? offsets + c * groups : nullptr,
                                 bias ? bias + c : nullptr, y + r * N + c, size_t(K), size_t(G));
    };
    int64_t c = n_begin;
    for (; c + 4 <= n_end; c += 4) tile(std::integral_constant<int, 4>{}, c);
    for (; c < n_end; ++c) tile(std::integral_constant<int, 1>{}, c);
  }
  return true;
}

#else  // !SLM_HAVE_DOTPROD_KERNELS

double DotprodDotLoop(int64_t, int32_t*) { return 0; }
double I8mmDotLoop(int64_t, int32_t*) { return 0; }

bool MatMulQ8DynColumnsDotprod(const int8_t*, const float*, const int8_t*, const float*, const float*, float*,
                               int64_t, int64_t, int64_t, int64_t, int64_t) {
  return false;
}
bool MatMulQ4DynColumnsDotprod(const int8_t*, const float*, const int32_t*, const uint8_t*, const float*,
                               const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                               int64_t) {
  return false;
}

#endif  // SLM_HAVE_DOTPROD_KERNELS

}  // namespace slm::kernels
