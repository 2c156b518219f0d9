// K/V row access shared by the f32 and int8-KV attention kernels (the Highway bodies in
// attention_body-inl.h and the scalar references), so that the two differ only in the row type:
//   KvRows<float>   f32 rows, each standing for itself (kernels.h Attention);
//   KvRows<int8_t>  int8 rows, each standing for q·scale with one scale per (slot or row, head)
//                   (attention_q8.h, cache format kv_int8_tokenhead_v1).
// Also the scalar reference attention over either, which reference::Attention and
// reference::AttentionQ8 both are.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace slm::kernels {

// Column c of [L cache slots ; T new rows] for kv head g: cache [Hkv, L, hd] for c < L, else
// this call's row c - L of fresh [T, Hkv, hd]; scales (int8 only) [Hkv, L] and [T, Hkv].
template <class Elem>
class KvRows {
 public:
  static constexpr bool kScaled = std::is_same_v<Elem, int8_t>;
  static_assert(kScaled || std::is_same_v<Elem, float>, "rows are f32 or int8 with scales");

  KvRows(const Elem* cache, const Elem* fresh, int64_t L, int64_t n_kv_heads, int64_t head_dim)
    requires(!kScaled)
      : cache_(cache), fresh_(fresh), L_(L), n_kv_heads_(n_kv_heads), head_dim_(head_dim) {}
  KvRows(const Elem* cache, const float* cache_scale, const Elem* fresh, const float* fresh_scale,
         int64_t L, int64_t n_kv_heads, int64_t head_dim)
    requires(kScaled)
      : cache_(cache), fresh_(fresh), cache_scale_(cache_scale), fresh_scale_(fresh_scale), L_(L),
        n_kv_heads_(n_kv_heads), head_dim_(head_dim) {}

  // The head_dim elements of column c, kv head g.
  const Elem* Row(int64_t g, int64_t c) const {
    return c < L_ ? cache_ + (g * L_ + c) * head_dim_
                  : fresh_ + ((c - L_) * n_kv_heads_ + g) * head_dim_;
  }

  // Columns [c, SegmentEnd(c, end)) lie in one of the two tensors, their rows RowStride(c)
  // elements apart: a walk over them steps a pointer instead of recomputing each row's address.
  int64_t SegmentEnd(int64_t c, int64_t end) const { return c < L_ && end > L_ ? L_ : end; }
  int64_t RowStride(int64_t c) const { return c < L_ ? head_dim_ : n_kv_heads_ * head_dim_; }

  // x · (the row's scale) for int8 rows, x itself for f32 rows: applied once per column to a
  // score or probability, never per element. (Not x · 1.0f: the f32 kernels do no multiply.)
  float Scaled(float x, int64_t g, int64_t c) const {
    if constexpr (kScaled) {
      return x * RowScale(g, c);
    } else {
      return x;
    }
  }

  // The scale of column c, kv head g (int8 rows).
  float RowScale(int64_t g, int64_t c) const
    requires(kScaled)
  {
    return c < L_ ? cache_scale_[g * L_ + c] : fresh_scale_[(c - L_) * n_kv_heads_ + g];
  }

 private:
  const Elem* cache_;
  const Elem* fresh_;
  const float* cache_scale_ = nullptr;
  const float* fresh_scale_ = nullptr;
  int64_t L_, n_kv_heads_, head_dim_;
};

namespace reference {

// Scalar attention of T rows over [L cache slots ; T new rows] (kernels.h Attention semantics):
// q [T, Hq*hd], mask [T, L+T], out [T, Hq*hd], scratch >= L+T floats. Written for clarity:
// every column is scanned and hidden (-inf) ones skipped; dot products and sums in double.
template <class Elem>
void AttentionOverRows(const float* q, const KvRows<Elem>& keys, const KvRows<Elem>& values,
                       const float* mask, float* out, float* scratch, int64_t T, int64_t L,
                       int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                       float softcap) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t cols = L + T;
  const int64_t group = n_heads / n_kv_heads;
  const int64_t hd = head_dim;
  for (int64_t t = 0; t < T; ++t) {
    const float* mrow = mask + t * cols;
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t g = h / group;
      const float* qh = q + (t * n_heads + h) * hd;
      float* oh = out + (t * n_heads + h) * hd;
      float max_s = kNegInf;
      for (int64_t c = 0; c < cols; ++c) {
        if (mrow[c] == kNegInf) continue;
        const Elem* kc = keys.Row(g, c);
        double dot = 0.0;
        for (int64_t i = 0; i < hd; ++i) dot += double(qh[i]) * double(kc[i]);
        float s = keys.Scaled(float(dot), g, c) * scale;
        if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
        s += mrow[c];
        scratch[c] = s;
        if (s > max_s) max_s = s;
      }
      double sum = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        if (mrow[c] == kNegInf) continue;
        scratch[c] = std::exp(scratch[c] - max_s);
        sum += scratch[c];
      }
      for (int64_t i = 0; i < hd; ++i) {
        double acc = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          if (mrow[c] == kNegInf) continue;
          const float p = values.Scaled(float(scratch[c] / sum), g, c);
          acc += double(p) * double(values.Row(g, c)[i]);
        }
        oh[i] = float(acc);  // 0 when no column is visible
      }
    }
  }
}

}  // namespace reference
}  // namespace slm::kernels
