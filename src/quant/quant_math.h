// The scalar rules of the int8 / int4 weight formats (kernels/quant_kernels.h layouts), shared
// by round-to-nearest (quantize.cc) and GPTQ (gptq.cc) so that both produce the same codes for
// the same values: GPTQ with no error to compensate (H = I) reproduces RTN byte for byte.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace slm::quant::detail {

// Round half to even of x (= std::nearbyint in the default rounding mode) without the libm
// call: the range search below rounds each value of a group ~32 times. Adding and subtracting
// 1.5·2^23 leaves no fraction bits when |x| <= 2^22; callers clamp x to a small range first.
// Plain IEEE float arithmetic (the project builds without -ffast-math) keeps both additions.
inline float RoundHalfEven(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 · 2^23
  return (x + kMagic) - kMagic;
}

// int8 per output channel, symmetric: scale = max|w| / 127, codes in [-127, 127].
inline float Int8Scale(const float* w, int64_t k) {
  float amax = 0;
  for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(w[i]));
  return amax / 127.0f;
}
// Clamping before rounding to one beyond the code range gives the same code as rounding first.
inline int Int8Code(float w, float scale) {
  return scale > 0 ? int(std::clamp(RoundHalfEven(std::clamp(w / scale, -128.0f, 128.0f)), -127.0f, 127.0f)) : 0;
}
inline float Int8Value(int q, float scale) { return float(q) * scale; }  // = DequantizeRowQ8

// int4 group parameters. Symmetric: the signed value of largest magnitude maps to exactly -8
// (scale may be negative), a step of max|w|/8 instead of max|w|/7, with only +8 clipped to +7.
// Asymmetric: min/max over the group, offset = min.
struct Int4Params {
  float scale = 0, offset = 0;
};
inline Int4Params Int4GroupParams(const float* wg, int64_t group, bool asymmetric) {
  Int4Params p;
  if (asymmetric) {
    float lo = wg[0], hi = wg[0];
    for (int64_t i = 1; i < group; ++i) lo = std::min(lo, wg[i]), hi = std::max(hi, wg[i]);
    p.scale = (hi - lo) / 15.0f;
    p.offset = lo;
  } else {
    float peak = 0;
    for (int64_t i = 0; i < group; ++i) if (std::fabs(wg[i]) > std::fabs(peak)) peak = wg[i];
    p.scale = peak / -8.0f;
  }
  return p;
}
inline int Int4Code(float w, const Int4Params& p, bool asymmetric) {
  if (asymmetric) {
    return p.scale > 0 ? int(std::clamp(RoundHalfEven(std::clamp((w - p.offset) / p.scale, -1.0f, 16.0f)), 0.0f, 15.0f)) : 0;
  }
  return p.scale != 0 ? int(std::clamp(RoundHalfEven(std::clamp(w / p.scale, -9.0f, 8.0f)) + 8.0f, 0.0f, 15.0f)) : 8;
}
// = DequantizeRowQ4: scale·q + (offset, or -8·scale when symmetric).
inline float Int4Value(int q, const Int4Params& p, bool asymmetric) {
  return p.scale * float(q) + (asymmetric ? p.offset : -8.0f * p.scale);
}

// Σ importance[t]·(w[t] − ŵ[t])² over the group wg [group] quantized with p (Int4Code, then
// Int4Value); importance nullptr = all 1.
inline double Int4GroupError(const float* wg, int64_t group, const Int4Params& p, bool asymmetric,
                             const double* importance) {
  double e = 0;
  for (int64_t t = 0; t < group; ++t) {
    const double d = double(wg[t]) - double(Int4Value(Int4Code(wg[t], p, asymmetric), p, asymmetric));
    e += (importance != nullptr ? importance[t] : 1.0) * d * d;
  }
  return e;
}

// int4 group parameters chosen by search (the "mse" range search of llama.cpp / AWQ / the GPTQ
// reference): with min/max, one extreme value sets the step of the whole group; a clipped range
// often gives all the other values a finer step. Candidates, scored by Int4GroupError:
//   symmetric:  scale = f · peak / -8,    f ∈ {1, 0.97, …, 0.55}                  (16);
//   asymmetric: [min + a·δ, max − b·δ],   δ = (max − min) / 20, a, b ∈ {0, …, 3}  (16).
// Min/max (f = 1, a = b = 0) wins ties, so the result is never worse than Int4GroupParams and a
// group that min/max represents exactly (all values equal, all zero) keeps it. `importance`
// [group] weights each value's squared error (GPTQ: diag H of the group's inputs); nullptr =
// all 1 (round to nearest). All-1 importance chooses exactly what nullptr does (1·x = x), which
// keeps GPTQ with H = I byte for byte equal to round to nearest.
// Not done: a least-squares refit of the step to the chosen codes. It raised the weight SQNR of
// stories260K by another 0.3–0.8 dB, but not its perplexity (docs/quantization.md).
inline Int4Params Int4SearchGroupParams(const float* wg, int64_t group, bool asymmetric,
                                        const double* importance = nullptr) {
  const Int4Params full = Int4GroupParams(wg, group, asymmetric);
  Int4Params best = full;
  double best_err = Int4GroupError(wg, group, full, asymmetric, importance);
  if (!(best_err > 0)) return best;
  auto consider = [&](const Int4Params& c) {
    const double e = Int4GroupError(wg, group, c, asymmetric, importance);
    if (e < best_err) best_err = e, best = c;
  };
  if (!asymmetric) {
    for (int i = 1; i < 16; ++i) consider({full.scale * (1.0f - 0.03f * float(i)), 0.0f});
  } else {
    const float lo = full.offset, hi = full.offset + 15.0f * full.scale, delta = 0.75f * full.scale;
    for (int a = 0; a < 4; ++a) {
      for (int b = 0; b < 4; ++b) {
        if (a == 0 && b == 0) continue;  // = min/max
        const float l = lo + float(a) * delta, h = hi - float(b) * delta;
        consider({(h - l) / 15.0f, l});
      }
    }
  }
  return best;
}

// Packs code q of column kk into a row of the kernel layout: per 32 columns, 16 bytes; column
// c < 16 in the low nibble of byte c, column c >= 16 in the high nibble of byte c - 16.
inline void SetQ4(uint8_t* row, int64_t kk, int q) {
  uint8_t& b = row[(kk / 32) * 16 + (kk % 16)];
  if ((kk % 32) < 16) b = uint8_t((b & 0xF0) | q);
  else b = uint8_t((b & 0x0F) | (q << 4));
}

}  // namespace slm::quant::detail
