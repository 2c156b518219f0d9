// Highway bodies of the quantized matrix products (kernels/quant_kernels.h), compiled once per
// SIMD target via matmul_q.cc.
//
// Weight-only (f32 activations):
//  - R < 4 (decode): each weight row is streamed once and dequantized in registers (int → f32
//    convert, then FMA), kN rows at a time for independent FMA chains. Memory-bound by design.
//    Int4 on AVX-512 takes the nibble-plane kernel of matmul_q4_planes-inl.h instead, on AVX2 its
//    256-bit form (matmul_q4_planes256-inl.h), or, switched on (Int4DecodeX16Enabled), the
//    16-bit x tile of matmul_q4_x16-inl.h.
//    Each step also prefetches the same k of the next tile's rows (rows are contiguous: kN rows
//    ahead): a tile's kN short streams (one row each) left the loads waiting on memory that the
//    hardware prefetchers had not yet fetched; +12–30% decode tok/s on the 1B int8 and int4
//    artifacts (A/B in one run, `staticlm bench -p 16 -n 32`). Int8 rows longer than 1 KB are
//    prefetched 1 KB ahead along the row instead (decode_prefetch.h).
//  - R >= 4 (prefill): a slab of weight rows is dequantized once into a per-thread f32 buffer
//    and multiplied with all R rows by the f32 kernels (the panel GEMM of matmul_panel-inl.h
//    from PanelWidth() rows on, the tiles of matmul-inl.h below), so the dequantization cost is
//    divided by R and the inner loop is the f32 GEMM's.
// Dynamic (int8 activations): exact int32 dot products with int16 widening multiply-adds
// (ReorderWidenMulAccumulate = vpmaddwd on x86), 4 activation rows per unpacked weight vector
// (Q4 decode: 4 weight rows per activation vector; on AVX2 the vpmaddubsw tile of
// matmul_q4_dyn256-inl.h instead); each Q4 group's dot is reduced across lanes
// and folded into one f32 accumulator per output. Prefill from 2 vectors of rows on: the exact
// int16 panels of matmul_dyn_panel-inl.h, which form every output as these tiles do (the same
// bits).

#if defined(SLM_KERNELS_MATMUL_Q_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SLM_KERNELS_MATMUL_Q_INL_H_
#undef SLM_KERNELS_MATMUL_Q_INL_H_
#else
#define SLM_KERNELS_MATMUL_Q_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "hwy/highway.h"
#include "kernels/decode_prefetch.h"
#include "kernels/decode_row_order.h"
#include "kernels/lane_sums-inl.h"
#include "kernels/matmul-inl.h"
#include "kernels/matmul_dyn_panel-inl.h"
#include "kernels/matmul_q4_dyn256-inl.h"
#include "kernels/matmul_q4_planes-inl.h"
#include "kernels/matmul_q4_planes256-inl.h"
#include "kernels/matmul_q4_x16-inl.h"
#include "kernels/quant_kernels.h"
#include "kernels/vec_tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace slm::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Weight rows dequantized per slab in the prefill path.
constexpr size_t kSlab = 16;

// Grow-only per-thread buffer for the dequantized slab: allocates on a thread's first prefill
// call for a given K, never on later calls.
HWY_INLINE float* SlabBuffer(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

// out[K] = Q8 row dequantized (scale applied).
HWY_INLINE void DequantQ8Row(const int8_t* HWY_RESTRICT w, float scale, float* HWY_RESTRICT out,
                             size_t K) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t NL = hn::Lanes(df);
  const auto vs = hn::Set(df, scale);
  size_t k = 0;
  for (; k + NL <= K; k += NL) {
    hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, w + k))), vs), df, out + k);
  }
  for (; k < K; ++k) out[k] = float(w[k]) * scale;
}

// out[K] = Q4 row dequantized. K % 32 == 0 (checked at load).
HWY_INLINE void DequantQ4Row(const uint8_t* HWY_RESTRICT w, const float* HWY_RESTRICT scales,
                             const float* HWY_RESTRICT offsets, float* HWY_RESTRICT out, size_t K,
                             size_t G) {
  const hn::CappedTag<float, 16> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> d8;
  const size_t NL = hn::Lanes(df);
  const auto mask = hn::Set(di, 0x0F);
  for (size_t g = 0; g < K / G; ++g) {
    const auto vs = hn::Set(df, scales[g]);
    const auto vo = hn::Set(df, offsets ? offsets[g] : -8.0f * scales[g]);
    for (size_t b = g * G; b < (g + 1) * G; b += 32) {
      const uint8_t* blk = w + b / 2;
      for (size_t j = 0; j < 16; j += NL) {
        const auto q = hn::PromoteTo(di, hn::LoadU(d8, blk + j));
        const auto lo = hn::ConvertTo(df, hn::And(q, mask));
        const auto hi = hn::ConvertTo(df, hn::ShiftRight<4>(q));
        hn::StoreU(hn::MulAdd(lo, vs, vo), df, out + b + j);
        hn::StoreU(hn::MulAdd(hi, vs, vo), df, out + b + 16 + j);
      }
    }
  }
}

// All R rows against the f32 slab (rows [0, ns) of `slab`, [ns, K]) → y columns n0..n0+ns.
HWY_INLINE void SlabProduct(const float* x, const float* slab, const float* bias, float* y,
                            size_t R, size_t K, size_t N, size_t n0, size_t ns) {
  const size_t rows4 = R / 4 * 4;
  float* yb = y + n0;
  const float* bb = bias ? bias + n0 : nullptr;
  MatMulRows<4, kFourRowTileCols>(x, slab, bb, yb, K, N, 0, rows4, 0, ns);
  switch (R - rows4) {
    case 1: MatMulRows<1, kOneRowTileCols>(x, slab, bb, yb, K, N, rows4, rows4 + 1, 0, ns); break;
    case 2: MatMulRows<2, kTwoRowTileCols>(x, slab, bb, yb, K, N, rows4, rows4 + 2, 0, ns); break;
    case 3: MatMulRows<3, kThreeRowTileCols>(x, slab, bb, yb, K, N, rows4, rows4 + 3, 0, ns); break;
    default: break;
  }
}

// ---- Q8 weight-only ----



// y[r, n..n+kN) for one row r: kN weight rows streamed together. Two accumulators per row
// (alternate vectors of k) so that 2·kN independent FMA chains hide the FMA latency: with one
// chain per row the loop is latency-bound at a fraction of the FMA throughput. kIntoL1: the
// prefetch goes to L1 instead of L2 (Q8DecodePrefetchIntoL1, decode_prefetch.h). The tile's rows
// are `stride` rows apart; `next`: rows from each to its place in the next tile
// (ForEachDecodeTile, decode_row_order.h).
template <size_t kN, bool kIntoL1>
HWY_INLINE void Q8RowTile(const float* HWY_RESTRICT x, const int8_t* HWY_RESTRICT w,
                          const float* scales, const float* bias, float* y, size_t K, size_t stride,
                          size_t next) {
  const size_t rw = stride * K;  // elements between the tile's rows
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t NL = hn::Lanes(df);
  using V = hn::Vec<decltype(df)>;
  SLM_VEC_TILE(V, acc0, kN);
  SLM_VEC_TILE(V, acc1, kN);
  HWY_UNROLL(8)
  for (size_t c = 0; c < kN; ++c) acc0[c] = acc1[c] = hn::Zero(df);
  size_t k = 0;
  for (; k + 2 * NL <= K; k += 2 * NL) {
    const auto x0 = hn::LoadU(df, x + k);
    const auto x1 = hn::LoadU(df, x + k + NL);
    // Once per 64-byte line of each row (a step is 32 bytes on AVX-512, 16 on AVX2, 8 on NEON):
    // 1B int8 decode, thirtieth session (docs/benchmarks.md). See decode_prefetch.h.
    const int8_t* ahead = w + k + DecodePrefetchDistance(k, K, next);
    const bool new_line = (k % 64) < 2 * NL;
    HWY_UNROLL(8)
    for (size_t c = 0; c < kN; ++c) {
      if (new_line) {
        if constexpr (kIntoL1) {
          PrefetchDecodeLineToL1(ahead + c * rw);
        } else {
          PrefetchDecodeLine(ahead + c * rw);
        }
      }
      const auto w0 = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, w + c * rw + k)));
      const auto w1 = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, w + c * rw + k + NL)));
      acc0[c] = hn::MulAdd(x0, w0, acc0[c]);
      acc1[c] = hn::MulAdd(x1, w1, acc1[c]);
    }
  }
  for (; k + NL <= K; k += NL) {
    const auto xv = hn::LoadU(df, x + k);
    HWY_UNROLL(8)
    for (size_t c = 0; c < kN; ++c) {
      const auto wv = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, w + c * rw + k)));
      acc0[c] = hn::MulAdd(xv, wv, acc0[c]);
    }
  }
  for (size_t c = 0; c < kN; ++c) {
    float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0[c], acc1[c])));
    for (size_t kk = k; kk < K; ++kk) s += x[kk] * float(w[c * rw + kk]);
    s *= scales[c * stride];
    if (bias) s += bias[c * stride];
    y[c * stride] = s;
  }
}

// The prefill path, out of line: inlined into MatMulQ8Columns it made GCC spill the decode
// tile's accumulators.
HWY_NOINLINE void Q8PanelColumns(const float* x, const int8_t* w, const float* scales,
                                 const float* bias, float* y, int64_t R, int64_t K, int64_t N,
                                 int64_t n_begin, int64_t n_end) {
  const size_t k = size_t(K);
  float* slab = SlabBuffer(kPanelM * k);
  PanelProduct(x, bias, y, size_t(R), k, size_t(N), size_t(n_begin), size_t(n_end), w, k, [&](size_t row, size_t rows) {
    for (size_t c = 0; c < rows; ++c) DequantQ8Row(w + (row + c) * k, scales[row + c], slab + c * k, k);
    return static_cast<const float*>(slab);
  });
}

// Rows [0, R) (R < 4) × weight rows [n_begin, n_end), Q8RowTile by Q8RowTile.
template <bool kIntoL1>
HWY_INLINE void Q8RowTiles(const float* x, const int8_t* w, const float* scales, const float* bias, float* y,
                           int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  const size_t k = size_t(K), n = size_t(N);
  // 8 weight rows per tile on AVX-512 (32 registers hold the 16 accumulators; SVE's
  // HWY_MAX_BYTES is 256, so SVE takes 8 too, also with 32 registers, unmeasured), 4 elsewhere.
  // 8 rows are 8 streams from memory per thread: 1B int8 decode 1.15-1.26x the 4-row tile (2
  // threads, 3 alternated rounds) and faster than an AVX-512 VNNI body with 8-row tiles that split
  // x into int8 parts, which was therefore not kept; 8 rows did not help the int4 planes tile or
  // the 8da8w tile (the int4 split-x tiles, nineteenth session, did gain from 8 and 16 rows:
  // matmul_q4_split_x.cc). AVX2 (16 registers; measured through --simd-target AVX2 on the
  // AVX-512 machine): 6 rows 0.97-1.13x, 8 rows 0.90-1.06x the 4-row tile, 3 alternated rounds,
  // so 4 stay. NEON unmeasured (docs/benchmarks.md).
  constexpr size_t kN = HWY_MAX_BYTES >= 64 ? 8 : 4;
  // AVX2: rows under 4 KB one per page (decode_row_order.h; measured on Zen 2 only, so the other
  // targets keep adjacent rows).
  const size_t spread = (HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2) ? DecodeRowSpread(k) : 1;
  for (size_t r = 0; r < size_t(R); ++r) {
    const auto tile = [&](auto rows_tag, size_t c, size_t stride, size_t next) {
      Q8RowTile<decltype(rows_tag)::value, kIntoL1>(x + r * k, w + c * k, scales + c, bias ? bias + c : nullptr,
                                                    y + r * n + c, k, stride, next);
    };
    ForEachDecodeTile<kN>(size_t(n_begin), size_t(n_end), spread, tile);
  }
}

void MatMulQ8Columns(const float* x, const int8_t* w, const float* scales, const float* bias,
                     float* y, int64_t R, int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  const size_t k = size_t(K), n = size_t(N);
  if (size_t(R) >= PanelWidth()) return Q8PanelColumns(x, w, scales, bias, y, R, K, N, n_begin, n_end);
  if (R >= 4) {
    float* slab = SlabBuffer(kSlab * k);
    for (size_t n0 = size_t(n_begin); n0 < size_t(n_end); n0 += kSlab) {
      const size_t ns = std::min(kSlab, size_t(n_end) - n0);
      for (size_t c = 0; c < ns; ++c) DequantQ8Row(w + (n0 + c) * k, scales[n0 + c], slab + c * k, k);
      SlabProduct(x, slab, bias, y, size_t(R), k, n, n0, ns);
    }
    return;
  }
  if (Q8DecodePrefetchIntoL1()) return Q8RowTiles<true>(x, w, scales, bias, y, R, K, N, n_begin, n_end);
  Q8RowTiles<false>(x, w, scales, bias, y, R, K, N, n_begin, n_end);
}

// ---- Q4 weight-only ----

// y[r, c] for one row r and one weight row: dequantize in registers, FMA with x.
template <size_t kN>
HWY_INLINE void Q4RowTile(const float* HWY_RESTRICT x, const uint8_t* HWY_RESTRICT w,
                          const float* scales, const float* offsets, const float* bias, float* y,
                          size_t K, size_t G) {
  const hn::CappedTag<float, 16> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> d8;
  const size_t NL = hn::Lanes(df);
  const size_t groups = K / G;
  const auto mask = hn::Set(di, 0x0F);
  // Two accumulators per row (low / high nibble runs): 2·kN independent FMA chains.
  using V = hn::Vec<decltype(df)>;
  SLM_VEC_TILE(V, acc, kN);
  SLM_VEC_TILE(V, acc_hi, kN);
  HWY_UNROLL(4)
  for (size_t c = 0; c < kN; ++c) acc[c] = acc_hi[c] = hn::Zero(df);
  for (size_t g = 0; g < groups; ++g) {
    SLM_VEC_TILE(V, vs, kN);
    SLM_VEC_TILE(V, vo, kN);
    HWY_UNROLL(4)
    for (size_t c = 0; c < kN; ++c) {
      const float s = scales[c * groups + g];
      vs[c] = hn::Set(df, s);
      vo[c] = hn::Set(df, offsets ? offsets[c * groups + g] : -8.0f * s);
    }
    for (size_t b = g * G; b < (g + 1) * G; b += 32) {
      for (size_t j = 0; j < 16; j += NL) {
        const auto xlo = hn::LoadU(df, x + b + j);
        const auto xhi = hn::LoadU(df, x + b + 16 + j);
        HWY_UNROLL(4)
        for (size_t c = 0; c < kN; ++c) {
          PrefetchDecodeLine(w + (kN + c) * (K / 2) + b / 2 + j);  // the next tile's row c
          const auto q = hn::PromoteTo(di, hn::LoadU(d8, w + c * (K / 2) + b / 2 + j));
          const auto lo = hn::MulAdd(hn::ConvertTo(df, hn::And(q, mask)), vs[c], vo[c]);
          const auto hi = hn::MulAdd(hn::ConvertTo(df, hn::ShiftRight<4>(q)), vs[c], vo[c]);
          acc[c] = hn::MulAdd(xlo, lo, acc[c]);
          acc_hi[c] = hn::MulAdd(xhi, hi, acc_hi[c]);
        }
      }
    }
  }
  for (size_t c = 0; c < kN; ++c) {
    float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc[c], acc_hi[c])));
    if (bias) s += bias[c];
    y[c] = s;
  }
}

HWY_NOINLINE void Q4PanelColumns(const float* x, const uint8_t* w, const float* scales,
                                 const float* offsets, const float* bias, float* y, int64_t R,
                                 int64_t K, int64_t N, int64_t G, int64_t n_begin, int64_t n_end) {
  const size_t k = size_t(K), g = size_t(G), groups = k / g;
  float* slab = SlabBuffer(kPanelM * k);
  PanelProduct(x, bias, y, size_t(R), k, size_t(N), size_t(n_begin), size_t(n_end), w, k / 2, [&](size_t row, size_t rows) {
    for (size_t c = 0; c < rows; ++c) {
      DequantQ4Row(w + (row + c) * (k / 2), scales + (row + c) * groups,
                   offsets ? offsets + (row + c) * groups : nullptr, slab + c * k, k, g);
    }
    return static_cast<const float*>(slab);
  });
}

void MatMulQ4Columns(const float* x, const uint8_t* w, const float* scales, const float* offsets,
                     const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                     int64_t n_begin, int64_t n_end) {
  const size_t k = size_t(K), n = size_t(N), g = size_t(G), groups = k / g;
  if (size_t(R) >= PanelWidth()) return Q4PanelColumns(x, w, scales, offsets, bias, y, R, K, N, G, n_begin, n_end);
  if (R >= 4) {
    float* slab = SlabBuffer(kSlab * k);
    for (size_t n0 = size_t(n_begin); n0 < size_t(n_end); n0 += kSlab) {
      const size_t ns = std::min(kSlab, size_t(n_end) - n0);
      for (size_t c = 0; c < ns; ++c) {
        DequantQ4Row(w + (n0 + c) * (k / 2), scales + (n0 + c) * groups,
                     offsets ? offsets + (n0 + c) * groups : nullptr, slab + c * k, k, g);
      }
      SlabProduct(x, slab, bias, y, size_t(R), k, n, n0, ns);
    }
    return;
  }
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if (Q4PlanesApply(k, g)) {
    return Q4PlanesColumns(x, w, scales, offsets, bias, y, size_t(R), k, n, g, size_t(n_begin),
                           size_t(n_end), SlabBuffer(k + k / g));
  }
#endif
#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  if (Int4DecodeX16Enabled() && Q4Planes256Apply(k, g)) {
    return Q4X16Columns(x, w, scales, offsets, bias, y, size_t(R), k, n, g, size_t(n_begin), size_t(n_end),
                        SlabBuffer(k + k / g));
  }
  if (Q4Planes256Apply(k, g)) {
    return Q4Planes256Columns(x, w, scales, offsets, bias, y, size_t(R), k, n, g, size_t(n_begin),
                              size_t(n_end), SlabBuffer(k + k / g));
  }
#endif
  // 4 rows where there are 32 vector registers; x86 below AVX-512 has 16 (kN = 4 would spill).
  constexpr size_t kN = (HWY_ARCH_X86 && HWY_MAX_BYTES < 64) ? 2 : 4;
  for (size_t r = 0; r < size_t(R); ++r) {
    size_t c = size_t(n_begin);
    for (; c + kN <= size_t(n_end); c += kN) {
      Q4RowTile<kN>(x + r * k, w + c * (k / 2), scales + c * groups,
                    offsets ? offsets + c * groups : nullptr, bias ? bias + c : nullptr,
                    y + r * n + c, k, g);
    }
    for (; c < size_t(n_end); ++c) {
      Q4RowTile<1>(x + r * k, w + c * (k / 2), scales + c * groups,
                   offsets ? offsets + c * groups : nullptr, bias ? bias + c : nullptr,
                   y + r * n + c, k, g);
    }
  }
}

// ---- Dynamic int8 activations ----

// Per-row symmetric int8 quantization (quant_kernels.h), bit-identical to the scalar reference:
// the same product x·inv rounded to nearest-even (NearestInt), clamped to ±127.
void QuantizeRowsI8(const float* HWY_RESTRICT x, int8_t* HWY_RESTRICT xq, float* xscale,
                    int32_t* group_sums, int64_t R, int64_t K, int64_t G) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int16_t, decltype(df)> d16;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t NL = hn::Lanes(df), k = size_t(K);
  const auto lo = hn::Set(di, -127), hi = hn::Set(di, 127);
  // Group sums from the int32 codes while they are in registers, when whole vectors tile the
  // groups (else the scalar pass over the stored codes).
  const size_t g = size_t(G);
  const bool vector_sums = group_sums != nullptr && g % NL == 0 && k % g == 0;
  for (size_t r = 0; r < size_t(R); ++r) {
    const float* xr = x + r * k;
    auto vmax = hn::Zero(df);
    size_t i = 0;
    for (; i + NL <= k; i += NL) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xr + i)));
    float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    for (; i < k; ++i) amax = std::max(amax, std::fabs(xr[i]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    xscale[r] = amax / 127.0f;
    int8_t* qr = xq + r * k;
    const auto vinv = hn::Set(df, inv);
    i = 0;
    auto gsum = hn::Zero(di);
    for (; i + NL <= k; i += NL) {
      const auto q = hn::Min(hn::Max(hn::NearestInt(hn::Mul(hn::LoadU(df, xr + i), vinv)), lo), hi);
      hn::StoreU(hn::DemoteTo(d8, hn::DemoteTo(d16, q)), d8, qr + i);
      if (vector_sums) {
        gsum = hn::Add(gsum, q);
        if ((i + NL) % g == 0) {
          group_sums[r * (k / g) + i / g] = hn::GetLane(hn::SumOfLanes(di, gsum));
          gsum = hn::Zero(di);
        }
      }
    }
    for (; i < k; ++i) qr[i] = static_cast<int8_t>(std::clamp(std::nearbyint(xr[i] * inv), -127.0f, 127.0f));
    if (group_sums != nullptr && !vector_sums) reference::GroupSumsI8(qr, K, G, group_sums + r * (k / g));
  }
}

// int32 dot products of kR int8 rows (stride K) with one int8 weight row, over [k0, k1) where
// k1 - k0 is a multiple of the i16 lane count; sum0/sum1 (tiles of kR vectors, vec_tile-inl.h) as
// ReorderWidenMulAccumulate leaves them.
template <size_t kR, class D16, class D32, class Tile>
HWY_INLINE void DotI8Rows(D16 d16, D32 d32, const int8_t* HWY_RESTRICT xq, size_t K,
                          const int8_t* HWY_RESTRICT w, size_t k0, size_t k1, Tile& sum0,
                          Tile& sum1) {
  const hn::Rebind<int8_t, D16> d8;
  const size_t NL = hn::Lanes(d16);
  for (size_t k = k0; k + NL <= k1; k += NL) {
    const auto wv = hn::PromoteTo(d16, hn::LoadU(d8, w + k));
    HWY_UNROLL(4)
    for (size_t r = 0; r < kR; ++r) {
      const auto xv = hn::PromoteTo(d16, hn::LoadU(d8, xq + r * K + k));
      sum0[r] = hn::ReorderWidenMulAccumulate(d32, xv, wv, sum0[r], sum1[r]);
    }
  }
}

template <size_t kR>
HWY_INLINE void Q8DynTile(const int8_t* xq, const float* xscale, const int8_t* w, float scale,
                          const float* bias, float* y, size_t K, size_t ldy) {
  const hn::ScalableTag<int16_t> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const size_t NL = hn::Lanes(d16);
  using V32 = hn::Vec<decltype(d32)>;
  SLM_VEC_TILE(V32, s0, kR);
  SLM_VEC_TILE(V32, s1, kR);
  HWY_UNROLL(4)
  for (size_t r = 0; r < kR; ++r) s0[r] = s1[r] = hn::Zero(d32);
  const size_t kv = K / NL * NL;
  DotI8Rows<kR>(d16, d32, xq, K, w, 0, kv, s0, s1);
  for (size_t r = 0; r < kR; ++r) {
    int64_t dot = hn::GetLane(hn::SumOfLanes(d32, hn::Add(s0[r], s1[r])));
    for (size_t k = kv; k < K; ++k) dot += int32_t(xq[r * K + k]) * w[k];
    y[r * ldy] = Q8DynOutput(dot, xscale[r], scale, bias);
  }
}

// Decode: one row of xq × kN weight rows `stride` rows apart, x widened once per step for all kN
// rows; each dot is exact, so the outputs are Q8DynTile's bits. Each step prefetches the next
// tile's rows (`next` rows on: ForEachDecodeTile, decode_row_order.h) as the weight-only tile does.
template <size_t kN>
HWY_INLINE void Q8DynRowTile(const int8_t* HWY_RESTRICT xq, float xscale, const int8_t* HWY_RESTRICT w,
                             const float* scales, const float* bias, float* y, size_t K, size_t stride,
                             size_t next) {
  const hn::ScalableTag<int16_t> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const size_t NL = hn::Lanes(d16), rw = stride * K, kv = K / NL * NL;
  using V32 = hn::Vec<decltype(d32)>;
  SLM_VEC_TILE(V32, s0, kN);
  SLM_VEC_TILE(V32, s1, kN);
  HWY_UNROLL(4)
  for (size_t c = 0; c < kN; ++c) s0[c] = s1[c] = hn::Zero(d32);
  for (size_t k = 0; k < kv; k += NL) {
    const auto xv = hn::PromoteTo(d16, hn::LoadU(d8, xq + k));
    const int8_t* ahead = w + k + DecodePrefetchDistance(k, K, next);
    const bool new_line = k % 64 < NL;
    HWY_UNROLL(4)
    for (size_t c = 0; c < kN; ++c) {
      if (new_line) PrefetchDecodeLine(ahead + c * rw);
      s0[c] = hn::ReorderWidenMulAccumulate(d32, xv, hn::PromoteTo(d16, hn::LoadU(d8, w + c * rw + k)), s0[c], s1[c]);
    }
  }
  for (size_t c = 0; c < kN; ++c) {
    int64_t dot = hn::GetLane(hn::SumOfLanes(d32, hn::Add(s0[c], s1[c])));
    for (size_t k = kv; k < K; ++k) dot += int32_t(xq[k]) * w[c * rw + k];
    y[c * stride] = Q8DynOutput(dot, xscale, scales[c * stride], bias ? bias + c * stride : nullptr);
  }
}

void MatMulQ8DynColumns(const int8_t* xq, const float* xscale, const int8_t* w,
                        const float* scales, const float* bias, float* y, int64_t R, int64_t K,
                        int64_t N, int64_t n_begin, int64_t n_end) {
  const size_t k = size_t(K), n = size_t(N), rows4 = size_t(R) / 4 * 4;
#if HWY_TARGET != HWY_SCALAR
  // Prefill: the exact int16 panel of matmul_dyn_panel-inl.h (same bits as these tiles).
  if (size_t(R) >= DynPanelWidth()) {
    return Q8DynPanelColumns(xq, xscale, w, scales, bias, y, size_t(R), k, n, size_t(n_begin), size_t(n_end));
  }
#endif
#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  // Decode on AVX2: tiles of 4 weight rows, rows under 4 KB one per page (decode_row_order.h).
  if (R < 4) {
    for (size_t r = 0; r < size_t(R); ++r) {
      const auto tile = [&](auto rows_tag, size_t c, size_t stride, size_t next) {
        Q8DynRowTile<decltype(rows_tag)::value>(xq + r * k, xscale[r], w + c * k, scales + c, bias ? bias + c : nullptr,
                                                y + r * n + c, k, stride, next);
      };
      ForEachDecodeTile<4>(size_t(n_begin), size_t(n_end), DecodeRowSpread(k), tile);
    }
    return;
  }
#endif
  for (size_t c = size_t(n_begin); c < size_t(n_end); ++c) {
    const float* b = bias ? bias + c : nullptr;
    for (size_t r = 0; r < rows4; r += 4) Q8DynTile<4>(xq + r * k, xscale + r, w + c * k, scales[c], b, y + r * n + c, k, n);
    for (size_t r = rows4; r < size_t(R); ++r) Q8DynTile<1>(xq + r * k, xscale + r, w + c * k, scales[c], b, y + r * n + c, k, n);
  }
}

// kR activation rows × kN weight rows (one output, 4 rows or 4 weight rows; slot i = r·kN + n),
// in the 8da4w order every path follows (quant_kernels.h): per group g, the exact int32 dot over
// the group, reduced across lanes for the 4 slots at once, then folded into one f32 accumulator
// per output, one lane per slot; the panel of matmul_dyn_panel-inl.h forms its outputs the same
// way, so prefill rows give the decode path's bits.
template <size_t kR, size_t kN>
HWY_INLINE void Q4DynTile(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                          const uint8_t* w, const float* scales, const float* offsets,
                          const float* bias, float* y, size_t K, size_t G, size_t ldy) {
  static_assert((kR == 1 || kN == 1) && (kR * kN == 4 || kR * kN == 1), "4 rows, 4 weight rows or one output");
  const hn::CappedTag<int16_t, 16> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::Rebind<uint8_t, decltype(d16)> du8;
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const size_t NL = hn::Lanes(d16), groups = K / G, row_bytes = K / 2;
  const auto mask = hn::Set(d16, int16_t{0x0F});
  using V16 = hn::Vec<decltype(d16)>;
  using V32 = hn::Vec<decltype(d32)>;
  // Slot i's activation row and weight row.
  const auto row = [](size_t i) { return kR == 4 ? i : 0; };
  const auto col = [](size_t i) { return kN == 4 ? i : 0; };
#if HWY_TARGET == HWY_SCALAR
  const hn::Sisd<float> d4;  // one slot per vector: the same operations, one lane at a time
  constexpr size_t kSlotVectors = kR * kN;
#else
  const hn::Full128<float> d4;  // one lane per slot
  constexpr size_t kSlotVectors = 1;
#endif
  const hn::Rebind<int32_t, decltype(d4)> d4i;
  const size_t L4 = hn::Lanes(d4);
  using VF = hn::Vec<decltype(d4)>;
  // The 4 slots' values of f(slot) at vector v (L4 slots per vector).
  const auto slots = [&](auto dd, size_t v, auto f) {
    using T = hn::TFromD<decltype(dd)>;
    if (hn::Lanes(dd) == 1) return hn::Set(dd, T(f(v)));
#if HWY_TARGET != HWY_SCALAR
    if constexpr (kR * kN == 4) return FourLanes(dd, T(f(0)), T(f(1)), T(f(2)), T(f(3)));
#endif
    return hn::Set(dd, T(f(0)));
  };
  SLM_VEC_TILE(VF, acc, kSlotVectors);
  HWY_UNROLL(4)
  for (size_t v = 0; v < kSlotVectors; ++v) acc[v] = hn::Zero(d4);
  for (size_t g = 0; g < groups; ++g) {
    SLM_VEC_TILE(V32, s0, 4);
    SLM_VEC_TILE(V32, s1, 4);
    HWY_UNROLL(4)
    for (size_t i = 0; i < 4; ++i) s0[i] = s1[i] = hn::Zero(d32);
    for (size_t b = g * G; b < (g + 1) * G; b += 32) {
      for (size_t j = 0; j < 16; j += NL) {
        SLM_VEC_TILE(V16, xlo, kR);
        SLM_VEC_TILE(V16, xhi, kR);
        HWY_UNROLL(4)
        for (size_t r = 0; r < kR; ++r) {
          xlo[r] = hn::PromoteTo(d16, hn::LoadU(d8, xq + r * K + b + j));
          xhi[r] = hn::PromoteTo(d16, hn::LoadU(d8, xq + r * K + b + 16 + j));
        }
        HWY_UNROLL(4)
        for (size_t n = 0; n < kN; ++n) {
          // Decode (4 weight rows): the next tile's row n, as the weight-only tiles.
          if constexpr (kN > 1) PrefetchDecodeLine(w + (kN + n) * row_bytes + b / 2 + j);
          const auto q = hn::PromoteTo(d16, hn::LoadU(du8, w + n * row_bytes + b / 2 + j));
          const auto lo = hn::And(q, mask), hi = hn::ShiftRight<4>(q);
          HWY_UNROLL(4)
          for (size_t r = 0; r < kR; ++r) {
            s0[r * kN + n] = hn::ReorderWidenMulAccumulate(d32, xlo[r], lo, s0[r * kN + n], s1[r * kN + n]);
            s0[r * kN + n] = hn::ReorderWidenMulAccumulate(d32, xhi[r], hi, s0[r * kN + n], s1[r * kN + n]);
          }
        }
      }
    }
    HWY_UNROLL(4)
    for (size_t i = 0; i < 4; ++i) s0[i] = hn::Add(s0[i], s1[i]);
    HWY_ALIGN int32_t dots[4];
    SumOfLanes4(d32, s0, dots);
    const auto gs = [&](size_t i) { return group_sums[row(i) * groups + g]; };
    const auto dot = [&](size_t i) { return dots[i] - (offsets == nullptr ? 8 * gs(i) : 0); };
    const auto scale = [&](size_t i) { return scales[col(i) * groups + g]; };
    HWY_UNROLL(4)
    for (size_t v = 0; v < kSlotVectors; ++v) {
      auto di = L4 == 1 ? hn::Set(d4i, dot(v)) : hn::LoadU(d4i, dots);
      if (L4 > 1 && offsets == nullptr) di = hn::Sub(di, hn::ShiftLeft<3>(slots(d4i, v, gs)));
      const VF d = hn::ConvertTo(d4, di);
      acc[v] = hn::MulAdd(d, slots(d4, v, scale), acc[v]);
      if (offsets != nullptr) {
        const auto offset = [&](size_t i) { return offsets[col(i) * groups + g]; };
        acc[v] = hn::MulAdd(hn::ConvertTo(d4, slots(d4i, v, gs)), slots(d4, v, offset), acc[v]);
      }
    }
  }
  // y = acc · x_scale + bias, one fused step (Q4DynFinish).
  HWY_ALIGN float out[4];
  HWY_UNROLL(4)
  for (size_t v = 0; v < kSlotVectors; ++v) {
    const auto bias_of = [&](size_t i) { return bias != nullptr ? bias[col(i)] : 0.0f; };
    const auto xscale_of = [&](size_t i) { return xscale[row(i)]; };
    hn::StoreU(Q4DynFinish(d4, acc[v], slots(d4, v, xscale_of), slots(d4, v, bias_of)), d4, out + v * L4);
  }
  for (size_t i = 0; i < kR * kN; ++i) y[row(i) * ldy + col(i)] = out[i];
}

// 4 rows at a time share each weight vector (prefill below the panel); the rows left (decode)
// take 4 weight rows at a time, sharing each activation vector.
void MatMulQ4DynColumns(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                        const uint8_t* w, const float* scales, const float* offsets,
                        const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                        int64_t n_begin, int64_t n_end) {
  const size_t k = size_t(K), n = size_t(N), g = size_t(G), groups = k / g, rows = size_t(R);
#if HWY_TARGET != HWY_SCALAR
  // Prefill: the exact int16 panel of matmul_dyn_panel-inl.h (same bits as these tiles).
  if (rows >= DynPanelWidth()) {
    return Q4DynPanelColumns(xq, xscale, group_sums, w, scales, offsets, bias, y, rows, k, n, g,
                             size_t(n_begin), size_t(n_end));
  }
#endif
#if HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  // Decode on AVX2 without VNNI: the vpmaddubsw tile (matmul_q4_dyn256-inl.h), same bits.
  if (rows < 4 && Q4Dyn256Apply(k, g)) {
    return Q4Dyn256Columns(xq, xscale, group_sums, w, scales, offsets, bias, y, rows, k, n, g,
                           size_t(n_begin), size_t(n_end));
  }
#endif
  const auto tile = [&](auto rows_tag, auto cols_tag, size_t r, size_t c) {
    Q4DynTile<decltype(rows_tag)::value, decltype(cols_tag)::value>(
        xq + r * k, xscale + r, group_sums + r * groups, w + c * (k / 2), scales + c * groups,
        offsets ? offsets + c * groups : nullptr, bias ? bias + c : nullptr, y + r * n + c, k, g, n);
  };
  using One = std::integral_constant<size_t, 1>;
  using Four = std::integral_constant<size_t, 4>;
  const size_t rows4 = rows / 4 * 4;
  for (size_t c = size_t(n_begin); c < size_t(n_end); ++c) {
    for (size_t r = 0; r < rows4; r += 4) tile(Four{}, One{}, r, c);
  }
  for (size_t r = rows4; r < rows; ++r) {
    size_t c = size_t(n_begin);
    for (; c + 4 <= size_t(n_end); c += 4) tile(One{}, Four{}, r, c);
    for (; c < size_t(n_end); ++c) tile(One{}, One{}, r, c);
  }
}

}  // namespace slm::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SLM_KERNELS_MATMUL_Q_INL_H_
