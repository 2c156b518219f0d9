// The scalar rules of the int8 / int4 weight formats (kernels/quant_kernels.h layouts), shared
// by round-to-nearest (quantize.cc) and GPTQ (gptq.cc) so that both produce the same codes for
// the same values: GPTQ with no error to compensate (H = I) reproduces RTN byte for byte.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace slm::quant::detail {

// int8 per output channel, symmetric: scale = max|w| / 127, codes in [-127, 127].
inline float Int8Scale(const float* w, int64_t k) {
  float amax = 0;
  for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(w[i]));
  return amax / 127.0f;
}
inline int Int8Code(float w, float scale) {
  return scale > 0 ? int(std::clamp(std::nearbyint(w / scale), -127.0f, 127.0f)) : 0;
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
  if (asymmetric) return p.scale > 0 ? int(std::clamp(std::nearbyint((w - p.offset) / p.scale), 0.0f, 15.0f)) : 0;
  return p.scale != 0 ? int(std::clamp(std::nearbyint(w / p.scale) + 8.0f, 0.0f, 15.0f)) : 8;
}
// = DequantizeRowQ4: scale·q + (offset, or -8·scale when symmetric).
inline float Int4Value(int q, const Int4Params& p, bool asymmetric) {
  return p.scale * float(q) + (asymmetric ? p.offset : -8.0f * p.scale);
}
// Packs code q of column kk into a row of the kernel layout: per 32 columns, 16 bytes; column
// c < 16 in the low nibble of byte c, column c >= 16 in the high nibble of byte c - 16.
inline void SetQ4(uint8_t* row, int64_t kk, int q) {
  uint8_t& b = row[(kk / 32) * 16 + (kk % 16)];
  if ((kk % 32) < 16) b = uint8_t((b & 0xF0) | q);
  else b = uint8_t((b & 0x0F) | (q << 4));
}

}  // namespace slm::quant::detail
