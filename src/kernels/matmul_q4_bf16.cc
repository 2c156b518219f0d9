// AVX-512 BF16 body of the weight-only int4 decode product (R < 4 rows of f32 x), used by
// MatMulQ4Columns' dispatch (quant_kernels.h) ahead of the Highway "nibble planes" kernel of
// matmul_q4_planes-inl.h when the CPU has avx512bf16.
//
// Why: the planes kernel turns every nibble into an f32 with one vpermps per 16 weights and
// multiplies with one FMA per 16: with the weights in cache one core reaches ~3 ns per 128
// weights, which on two threads is below the DRAM stream the decode could have. Here one vpermw
// turns 32 nibbles into bf16 (q − 8, exact in bf16) and one vdpbf16ps per part of x (below)
// multiplies 32 of them by x and adds pairs into 16 f32 lanes: per 32 weights one lookup and one
// shift instead of two each. BM_MatMulQ4G32 1×8192×16384 (from DRAM, one thread): 1.25–1.33×.
//
// Precision: bf16 holds 8 significant bits, so x is split into three bf16 parts, hi = bf16(x),
// mid = bf16(x − hi), lo = bf16(x − hi − mid) (each rounded to nearest even; the differences
// are exact in f32), and each weight vector is multiplied by all three: x is represented to
// ~2⁻²⁷ relative, below f32's own 2⁻²⁴, the weight values exactly, the products bf16 × bf16 are
// exact in f32 and vdpbf16ps adds them in f32. So the result differs from the f32 planes kernel
// only by summation order. Two parts (2⁻¹⁸) ran the benchmark above 1.2–1.4× faster than three,
// but made the int4 zoo models' one-token logits differ from the chunked prefill's (f32 slab
// path) by up to 1.1e-3 instead of 4e-5 (peak |logit| 20–33). vdpbf16ps treats denormal inputs
// as zero: a part below ~1e-38 in magnitude contributes 0.
//
// Layout: a 64-byte load is one chunk of 128 weights (four 32-weight Q4 blocks, quant_kernels.h).
// As 32 words, nibble m (bits 4m..4m+3) of word e is nibble 4·(e%2) + m of dword e/2, i.e. lane
// e/2 of the planes kernel's plane 4·(e%2) + m; so bf16 plane m interleaves f32 planes m and m + 4
// word by word, and f32 lane i of a vdpbf16ps sums words 2i and 2i + 1, both of block i/4: the
// chunk's group scales are the same lane vector as the planes kernel's (Q4ChunkScales).
#include "kernels/matmul_q4_bf16.h"

#include <atomic>

#include "kernels/vnni_intrinsics.h"

namespace slm::kernels {

namespace {
std::atomic<bool> bf16_enabled_for_test{true};
}  // namespace

bool Bf16Available() {
#if SLM_HAVE_VNNI_KERNELS
  static const bool available = [] {
    if (vnni::DisabledByEnvironment("SLM_DISABLE_BF16")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return available && bf16_enabled_for_test.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void SetBf16EnabledForTest(bool enabled) { bf16_enabled_for_test.store(enabled); }

#if SLM_HAVE_VNNI_KERNELS

#define SLM_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

namespace {

constexpr size_t kChunk = vnni::kQ4PlaneChunk;
// Bf16 parts of x (hi, mid, lo) and words of permuted x per chunk: per part, 4 planes of 32 words.
constexpr size_t kParts = 3;
constexpr size_t kChunkWords = kParts * kChunk;

// The upper 16 bits of each f32 lane rounded to nearest even (bf16), in the low half of the lane.
SLM_BF16_TARGET inline __m512i RoundToBf16Bits(__m512i bits) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  return _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
}

// xb for one x row: per chunk and part p, bf16 plane m word e = part p of planes-kernel lane e/2
// of plane 4·(e%2) + m (vnni::ChunkToPlanes).
SLM_BF16_TARGET void PermuteToBf16Planes(const float* x, uint16_t* xb, size_t chunks) {
  for (size_t c = 0; c < chunks; ++c) {
    __m512 planes[8];
    vnni::ChunkToPlanes(x + c * kChunk, planes);
    uint16_t* out = xb + c * kChunkWords;
    for (size_t m = 0; m < 4; ++m) {
      // a: f32 plane m (even words), b: plane m + 4 (odd words); each loses a part per step.
      __m512 a = planes[m], b = planes[m + 4];
      for (size_t p = 0; p < kParts; ++p) {
        const __m512i a_part = RoundToBf16Bits(_mm512_castps_si512(a));
        const __m512i b_part = RoundToBf16Bits(_mm512_castps_si512(b));
        _mm512_storeu_si512(out + p * kChunk + 32 * m, _mm512_or_si512(a_part, _mm512_slli_epi32(b_part, 16)));
        a = _mm512_sub_ps(a, _mm512_castsi512_ps(_mm512_slli_epi32(a_part, 16)));
        b = _mm512_sub_ps(b, _mm512_castsi512_ps(_mm512_slli_epi32(b_part, 16)));
      }
    }
  }
}

// acc + Σ pairs a·b (bf16 words, f32 lanes). GCC 12 copies the accumulator in and out of the
// intrinsic's register in unrolled tiles, as with vpdpbusd (vnni::Dpbusd): inline asm keeps it.
SLM_BF16_TARGET inline __m512 Dpbf16(__m512 acc, __m512i a, __m512i b) {
#if defined(__GNUC__) && !defined(__clang__)
  __asm__("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
  return acc;
#else
  return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
#endif
}

// out[0..kN) = the dots of one x row (as xb) with kN weight rows streamed together; prefetching
// as the planes kernel's tile (the same chunk of the next tile's rows, the next tile's scales
// once per line).
template <size_t kScales, size_t kN>
SLM_BF16_TARGET inline void Q4Bf16Tile(const float* x, const uint16_t* xb, const float* xg,
                                       const uint8_t* w, const float* scales,
                                       const float* offsets, size_t K, size_t G, float* out) {
  // Word i: bf16 of (i % 16) − 8. vpermw reads the low 5 bits of each index word; bit 4 is the
  // next nibble's lowest bit, so the table repeats.
  alignas(64) static constexpr uint16_t kTable[32] = {
      0xC100, 0xC0E0, 0xC0C0, 0xC0A0, 0xC080, 0xC040, 0xC000, 0xBF80,
      0x0000, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0,
      0xC100, 0xC0E0, 0xC0C0, 0xC0A0, 0xC080, 0xC040, 0xC000, 0xBF80,
      0x0000, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0};
  const __m512i table = _mm512_load_si512(kTable);
  const size_t row_bytes = K / 2, groups = K / G, chunks = K / kChunk;
  __m512 acc[kN];
  for (size_t r = 0; r < kN; ++r) acc[r] = _mm512_setzero_ps();
  vnni::Q4ChunkScaleIndex<kScales> s(G);
  for (size_t c = 0; c < chunks; ++c, s.Next()) {
    const uint16_t* xc = xb + c * kChunkWords;
    for (size_t r = 0; r < kN; ++r) {
      const uint8_t* wc = w + r * row_bytes + c * (kChunk / 2);
      _mm_prefetch(reinterpret_cast<const char*>(wc + kN * row_bytes), _MM_HINT_T0);
      if (*s % 16 == 0) _mm_prefetch(reinterpret_cast<const char*>(scales + (r + kN) * groups + *s), _MM_HINT_T0);
      const __m512i v = _mm512_loadu_si512(wc);
      const __m512i p0 = _mm512_permutexvar_epi16(v, table);
      const __m512i p1 = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 4), table);
      const __m512i p2 = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 8), table);
      const __m512i p3 = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 12), table);
      // One chain per part (the small parts' sums stay apart from hi's until the end).
      const uint16_t* xm = xc + kChunk;
      const uint16_t* xl = xc + 2 * kChunk;
      __m512 hi = Dpbf16(_mm512_setzero_ps(), p0, _mm512_loadu_si512(xc));
      __m512 mid = Dpbf16(_mm512_setzero_ps(), p0, _mm512_loadu_si512(xm));
      __m512 lo = Dpbf16(_mm512_setzero_ps(), p0, _mm512_loadu_si512(xl));
      hi = Dpbf16(hi, p1, _mm512_loadu_si512(xc + 32));
      mid = Dpbf16(mid, p1, _mm512_loadu_si512(xm + 32));
      lo = Dpbf16(lo, p1, _mm512_loadu_si512(xl + 32));
      hi = Dpbf16(hi, p2, _mm512_loadu_si512(xc + 64));
      mid = Dpbf16(mid, p2, _mm512_loadu_si512(xm + 64));
      lo = Dpbf16(lo, p2, _mm512_loadu_si512(xl + 64));
      hi = Dpbf16(hi, p3, _mm512_loadu_si512(xc + 96));
      mid = Dpbf16(mid, p3, _mm512_loadu_si512(xm + 96));
      lo = Dpbf16(lo, p3, _mm512_loadu_si512(xl + 96));
      const __m512 chunk = _mm512_add_ps(hi, _mm512_add_ps(mid, lo));
      acc[r] = _mm512_fmadd_ps(vnni::Q4ChunkScales<kScales>(scales + r * groups + *s), chunk, acc[r]);
    }
  }
  for (size_t r = 0; r < kN; ++r) {
    const float* sr = scales + r * groups;
    if (offsets) acc[r] = _mm512_add_ps(acc[r], vnni::Q4OffsetTerm(sr, offsets + r * groups, xg, groups));
    out[r] = vnni::ReduceAdd(acc[r]) + vnni::Q4TailBlocks(x, w + r * row_bytes, sr, K, G);
  }
}

template <size_t kScales>
SLM_BF16_TARGET void Q4Bf16Rows(const float* x, const uint8_t* w, const float* scales,
                                const float* offsets, const float* bias, float* y, size_t R,
                                size_t K, size_t N, size_t G, size_t n_begin, size_t n_end) {
  constexpr size_t kN = 4;
  const size_t groups = K / G, row_bytes = K / 2, chunks = K / kChunk;
  // K / G group sums, then the bf16 planes (kParts words per weight).
  float* xg = reinterpret_cast<float*>(vnni::ThreadScratch(groups * sizeof(float) + chunks * kChunkWords * sizeof(uint16_t)));
  uint16_t* xb = reinterpret_cast<uint16_t*>(xg + groups);
  for (size_t r = 0; r < R; ++r) {
    const float* xr = x + r * K;
    PermuteToBf16Planes(xr, xb, chunks);
    if (offsets) vnni::Q4GroupSums(xr, xg, groups, G);
    float dots[kN];
    size_t c = n_begin;
    for (; c + kN <= n_end; c += kN) {
      Q4Bf16Tile<kScales, kN>(xr, xb, xg, w + c * row_bytes, scales + c * groups,
                              offsets ? offsets + c * groups : nullptr, K, G, dots);
      for (size_t j = 0; j < kN; ++j) y[r * N + c + j] = bias ? dots[j] + bias[c + j] : dots[j];
    }
    for (; c < n_end; ++c) {
      Q4Bf16Tile<kScales, 1>(xr, xb, xg, w + c * row_bytes, scales + c * groups,
                             offsets ? offsets + c * groups : nullptr, K, G, dots);
      y[r * N + c] = bias ? dots[0] + bias[c] : dots[0];
    }
  }
}

}  // namespace

bool MatMulQ4ColumnsBf16(const float* x, const uint8_t* w, const float* scales,
                         const float* offsets, const float* bias, float* y, int64_t R, int64_t K,
                         int64_t N, int64_t G, int64_t n_begin, int64_t n_end) {
  if (!Bf16Available() || R >= kQ4Bf16MaxRows || !vnni::Q4PlanesApply(size_t(K), size_t(G))) return false;
  const size_t r = size_t(R), k = size_t(K), n = size_t(N), g = size_t(G);
  switch (kChunk / g) {
    case 4: Q4Bf16Rows<4>(x, w, scales, offsets, bias, y, r, k, n, g, size_t(n_begin), size_t(n_end)); break;
    case 2: Q4Bf16Rows<2>(x, w, scales, offsets, bias, y, r, k, n, g, size_t(n_begin), size_t(n_end)); break;
    default: Q4Bf16Rows<1>(x, w, scales, offsets, bias, y, r, k, n, g, size_t(n_begin), size_t(n_end)); break;
  }
  return true;
}

#else

bool MatMulQ4ColumnsBf16(const float*, const uint8_t*, const float*, const float*, const float*,
                         float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) {
  return false;
}

#endif  // SLM_HAVE_VNNI_KERNELS

}  // namespace slm::kernels
