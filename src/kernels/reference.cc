// Scalar reference kernels (see reference.h). Each follows the HF/PyTorch formula literally;
// reductions use double accumulators so the reference is the most exact thing we compare with.
#include "kernels/reference.h"

#include <cmath>
#include <cstring>

#include "kernels/attention_rows.h"

namespace slm::kernels::reference {
namespace {

// y[i] = gelu(gate[i]) * up[i], with `Gelu` one of the activation references below (GeGlu's
// tanh and erf forms differ only in it).
template <void (*Gelu)(const float*, float*, int64_t)>
void GatedByUp(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float g;
    Gelu(gate + i, &g, 1);
    y[i] = g * up[i];
  }
}

}  // namespace

void MatMulF32(const float* x, const float* w, const float* bias, float* y, int64_t R, int64_t K,
               int64_t N) {
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += double(x[r * K + k]) * double(w[n * K + k]);
      y[r * N + n] = float(acc);
    }
  }
}

void RmsNorm(const float* x, const float* w, float* y, int64_t R, int64_t D, float eps,
             bool add_one) {
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = x + r * D;
    float* yr = y + r * D;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < D; ++i) sum_sq += double(xr[i]) * double(xr[i]);
    // HF: variance = x.pow(2).mean(-1) in float32; x * torch.rsqrt(variance + eps); * weight.
    const float variance = float(sum_sq / double(D));
    const float inv_rms = 1.0f / std::sqrt(variance + eps);
    for (int64_t i = 0; i < D; ++i) {
      const float g = add_one ? 1.0f + w[i] : w[i];
      yr[i] = (xr[i] * inv_rms) * g;
    }
  }
}

bool Embedding(const int32_t* ids, const float* table, float* out, int64_t T, int64_t V,
               int64_t D, float multiplier) {
  for (int64_t t = 0; t < T; ++t) {
    if (ids[t] < 0 || ids[t] >= V) return false;
  }
  for (int64_t t = 0; t < T; ++t) {
    const float* row = table + int64_t(ids[t]) * D;
    for (int64_t i = 0; i < D; ++i) out[t * D + i] = row[i] * multiplier;
  }
  return true;
}

void Rope(const float* x, const int32_t* pos, const float* inv_freq, float* y, int64_t T,
          int64_t n_heads, int64_t head_dim, int64_t rotary_dim, float attention_scaling) {
  const int64_t half = rotary_dim / 2;
  const int64_t row = n_heads * head_dim;
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x + t * row;
    float* yt = y + t * row;
    if (pos[t] < 0) {
      if (yt != xt) std::memcpy(yt, xt, sizeof(float) * size_t(row));
      continue;
    }
    // cos/sin once per (row, pair), shared by all heads: they dominate the cost otherwise.
    for (int64_t i = 0; i < half; ++i) {
      // torch: freqs = inv_freq @ pos in float32, cos()/sin() in float32, * scaling.
      const float angle = float(pos[t]) * inv_freq[i];
      const float c = std::cos(angle) * attention_scaling;
      const float s = std::sin(angle) * attention_scaling;
      for (int64_t h = 0; h < n_heads; ++h) {
        const float x1 = xt[h * head_dim + i];
        const float x2 = xt[h * head_dim + i + half];
        yt[h * head_dim + i] = x1 * c - x2 * s;
        yt[h * head_dim + i + half] = x2 * c + x1 * s;
      }
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      for (int64_t i = rotary_dim; i < head_dim; ++i) yt[h * head_dim + i] = xt[h * head_dim + i];
    }
  }
}

void Attention(const float* q, const float* k, const float* v, const float* k_cache,
               const float* v_cache, const float* mask, float* out, float* scratch, int64_t T,
               int64_t L, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
               float softcap) {
  AttentionOverRows(q, KvRows<float>(k_cache, k, L, n_kv_heads, head_dim),
                    KvRows<float>(v_cache, v, L, n_kv_heads, head_dim), mask, out, scratch, T, L,
                    n_heads, n_kv_heads, head_dim, scale, softcap);
}

void KvCommit(const float* k, const float* v, const int32_t* pos, float* k_cache, float* v_cache,
              int64_t T, int64_t L, int64_t n_kv_heads, int64_t head_dim) {
  const size_t bytes = sizeof(float) * size_t(head_dim);
  for (int64_t t = 0; t < T; ++t) {
    if (pos[t] < 0) continue;
    const int64_t slot = int64_t(pos[t]) % L;
    for (int64_t h = 0; h < n_kv_heads; ++h) {
      const int64_t src = (t * n_kv_heads + h) * head_dim;
      const int64_t dst = (h * L + slot) * head_dim;
      std::memcpy(k_cache + dst, k + src, bytes);
      std::memcpy(v_cache + dst, v + src, bytes);
    }
  }
}

void Add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void SwiGlu(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float silu = g / (1.0f + std::exp(-g));
    y[i] = silu * up[i];
  }
}

void GeluTanh(const float* x, float* y, int64_t n) {
  // torch's CPU kernel: kBeta = √2 · (2/√π) · 0.5 = √(2/π), in this operation order.
  const float kBeta = float(M_SQRT2 * M_2_SQRTPI * 0.5);
  const float kKappa = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    const float cube = xi * xi * xi;
    const float inner = kBeta * (xi + kKappa * cube);
    y[i] = 0.5f * xi * (1.0f + std::tanh(inner));
  }
}

void GeluErf(const float* x, float* y, int64_t n) {
  // torch's CPU kernel for approximate='none': (x * 0.5) * (1 + erf(x * M_SQRT1_2)), float32.
  const float kAlpha = float(M_SQRT1_2);
  for (int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    y[i] = (xi * 0.5f) * (1.0f + std::erf(xi * kAlpha));
  }
}

void GeGlu(const float* gate, const float* up, float* y, int64_t n) {
  // torch: act_fn(gate) * up with act_fn = gelu(approximate='tanh'), element by element.
  GatedByUp<GeluTanh>(gate, up, y, n);
}

void GeGluErf(const float* gate, const float* up, float* y, int64_t n) {
  GatedByUp<GeluErf>(gate, up, y, n);
}

void SoftCap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace slm::kernels::reference
