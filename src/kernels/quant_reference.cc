// Scalar references of kernels/quant_kernels.h, plus the portable helpers (row dequantization)
// that are not hot enough to need SIMD.
#include <algorithm>
#include <cmath>

#include "kernels/quant_kernels.h"

namespace slm::kernels {

namespace {
inline float Q4Offset(const float* scales, const float* offsets, int64_t i) {
  return offsets != nullptr ? offsets[i] : -8.0f * scales[i];
}
}  // namespace

void DequantizeRowQ8(const int8_t* w, const float* scales, int64_t K, int64_t row, float multiplier,
                     float* out) {
  const float s = scales[row] * multiplier;
  const int8_t* wr = w + row * K;
  for (int64_t k = 0; k < K; ++k) out[k] = float(wr[k]) * s;
}

void DequantizeRowQ4(const uint8_t* w, const float* scales, const float* offsets, int64_t K,
                     int64_t G, int64_t row, float multiplier, float* out) {
  const uint8_t* wr = w + row * (K / 2);
  const int64_t groups = K / G;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t gi = row * groups + k / G;
    out[k] = (scales[gi] * float(Q4At(wr, k)) + Q4Offset(scales, offsets, gi)) * multiplier;
  }
}

namespace reference {

void QuantizeRowsI8(const float* x, int8_t* xq, float* xscale, int32_t* group_sums, int64_t R,
                    int64_t K, int64_t G) {
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = x + r * K;
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(xr[k]));
    const float scale = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    xscale[r] = scale;
    int8_t* qr = xq + r * K;
    for (int64_t k = 0; k < K; ++k) {
      // nearbyint (ties to even, the FPU's mode); |x·inv| <= 127 so no clamp is needed, but
      // rounding noise at the max can reach 127.0000x: clamp anyway.
      const float q = std::nearbyint(xr[k] * inv);
      qr[k] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
    if (group_sums != nullptr) GroupSumsI8(qr, K, G, group_sums + r * (K / G));
  }
}

void GroupSumsI8(const int8_t* xq_row, int64_t K, int64_t G, int32_t* sums) {
  for (int64_t g = 0; g < K / G; ++g) {
    int32_t s = 0;
    for (int64_t k = g * G; k < (g + 1) * G; ++k) s += xq_row[k];
    sums[g] = s;
  }
}

void MatMulQ8(const float* x, const int8_t* w, const float* scales, const float* bias, float* y,
              int64_t R, int64_t K, int64_t N) {
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(x[r * K + k]) * double(w[n * K + k]);
      s *= scales[n];
      if (bias) s += bias[n];
      y[r * N + n] = float(s);
    }
  }
}

void MatMulQ4(const float* x, const uint8_t* w, const float* scales, const float* offsets,
              const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G) {
  const int64_t groups = K / G;
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t gi = n * groups + k / G;
        const double wv = double(scales[gi]) * Q4At(w + n * (K / 2), k) + Q4Offset(scales, offsets, gi);
        s += double(x[r * K + k]) * wv;
      }
      if (bias) s += bias[n];
      y[r * N + n] = float(s);
    }
  }
}


void MatMulQ8Dyn(const int8_t* xq, const float* xscale, const int8_t* w, const float* scales,
                 const float* bias, float* y, int64_t R, int64_t K, int64_t N) {
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      int64_t dot = 0;
      for (int64_t k = 0; k < K; ++k) dot += int64_t(xq[r * K + k]) * w[n * K + k];
      double s = double(dot) * xscale[r] * scales[n];
      if (bias) s += bias[n];
      y[r * N + n] = float(s);
    }
  }
}

void MatMulQ4Dyn(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                 const uint8_t* w, const float* scales, const float* offsets, const float* bias,
                 float* y, int64_t R, int64_t K, int64_t N, int64_t G) {
  const int64_t groups = K / G;
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t g = 0; g < groups; ++g) {
        int64_t dot = 0;
        for (int64_t k = g * G; k < (g + 1) * G; ++k) dot += int64_t(xq[r * K + k]) * Q4At(w + n * (K / 2), k);
        const int64_t gi = n * groups + g;
        s += double(scales[gi]) * double(dot) + double(Q4Offset(scales, offsets, gi)) * group_sums[r * groups + g];
      }
      s *= xscale[r];
      if (bias) s += bias[n];
      y[r * N + n] = float(s);
    }
  }
}

}  // namespace reference
}  // namespace slm::kernels
