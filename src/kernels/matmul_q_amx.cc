// AMX panel GEMMs for the prefill-shaped 8da8w and 8da4w products (see matmul_q_amx.h).
//
// tdpbssd C += A·B multiplies signed bytes by signed bytes: A is 16 rows × 64 bytes (k), B is 16
// rows of 4 consecutive k × 16 columns (the "VNNI layout"), C 16 × 16 int32. The weights are the
// A operand: a block of 32 weight rows is copied (8da8w) or unpacked to q − 8 (8da4w) into a slab
// of whole tiles while the block before computes. The activations of the call are transposed
// once into the VNNI panels' layout (avx512_transpose.h: xt[panel][k/4][32 rows][4 bytes]), which
// is the B layout: a B tile is 16 consecutive quads of 16 rows, 128 bytes apart. A block of 32
// weight rows and a panel of 32 activation rows use 4 C tiles (2 A + 2 B + 4 C = the 8 tiles); C
// holds dot[weight row][activation row], so the epilogue transposes 16 × 16 results in registers
// to write rows of y. The integer dots are exact and every f32 operation is the VNNI panels' in
// their order, so the results have the same bits as every other 8da8w / 8da4w path.
#include "kernels/matmul_q_amx.h"

#include <algorithm>
#include <cstring>

#include "kernels/avx512_transpose.h"
#include "kernels/cpu_feature.h"
#include "kernels/decode_prefetch.h"
#include "kernels/matmul_q_vnni.h"
#include "kernels/vnni_intrinsics.h"
#include "kernels/vnni_panels.h"

#if SLM_HAVE_VNNI_KERNELS && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SLM_HAVE_AMX_KERNELS 1
#define SLM_AMX_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,amx-tile,amx-int8")))
#endif

namespace slm::kernels {

namespace {
bool CpuHasAmxInt8() {
#if SLM_HAVE_AMX_KERNELS
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1;
  // The CPU's AVX-512 VNNI itself (the panels' transposes and epilogues), not VnniAvailable():
  // that one also answers to the tests' switch, and this answer is cached for the process.
  __builtin_cpu_init();
  const bool avx512_vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vnni");
  if (!amx_tile || !amx_int8 || !avx512_vnni) return false;
  // Linux enables the 8 KB tile data state per process on request (it is "dynamically
  // enabled": without the permission the first tile instruction raises SIGILL). The request
  // covers every thread of the process, those running already included.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
CpuFeature amx(CpuHasAmxInt8, "SLM_DISABLE_AMX");
}  // namespace

// Off with the VNNI bodies too (SLM_DISABLE_VNNI, a Highway target below AVX3): the AMX panels
// run inside their dispatch.
bool AmxAvailable() { return amx.Available() && VnniAvailable(); }
void SetAmxEnabledForTest(bool enabled) { amx.SetEnabledForTest(enabled); }

#if SLM_HAVE_AMX_KERNELS

namespace {
using vnni::Align64;
using vnni::kQuadPanelRows;
using vnni::PadToPanels;
using vnni::PanelScratch;
using vnni::Transpose16x16;
using vnni::TransposeQuads;

constexpr size_t kP = kQuadPanelRows;

// Palette 1: C tiles 0..3 of 16 rows × 64 bytes, A tiles 4 and 5 of 16 rows × k_bytes, B tiles 6
// and 7 of k_bytes / 4 rows × 64 bytes (k_bytes k per tdpbssd). Constants in read-only data: GCC
// 12's _tile_loadconfig tells the compiler it reads 8 bytes of the struct, so a local one could be
// loaded before its other stores were made.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);
constexpr TileConfig MakeTileConfig(uint16_t k_bytes) {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = t == 4 || t == 5 ? k_bytes : 64;
    c.rows[t] = t == 6 || t == 7 ? uint8_t(k_bytes / 4) : 16;
  }
  return c;
}
constexpr TileConfig kTileConfig = MakeTileConfig(64);
constexpr TileConfig kTileConfig32 = MakeTileConfig(32);  // 8da4w, G = 32

// y[row0 + j, i] = r[i] lane j for the rows row0 + j < R (y: the first of 16 columns, rows N
// apart): the tiles' C holds dot[weight row][activation row], so 16 × 16 results are transposed
// in registers and each row of y gets 16 contiguous columns.
// The weight rows of the block at column `at` of [.., end): blocks of 32 rows (2 A tiles), then
// one of 16 if 16 are left, then none (the VNNI panel takes the rest).
inline size_t BlockRows(size_t at, size_t end) { return at + 32 <= end ? 32 : at + 16 <= end ? 16 : 0; }

SLM_AMX_TARGET inline void StoreTransposed(__m512i (&r)[16], float* y, size_t row0, size_t R, size_t N) {
  Transpose16x16(r);
  const size_t rows = std::min<size_t>(16, R - row0);
  for (size_t j = 0; j < rows; ++j) _mm512_storeu_si512(y + (row0 + j) * N, r[j]);
}

// GCC 12's tile load and store intrinsics are asm statements that declare no memory operands:
// without this barrier the compiler may move stores of what a tile loads after the load, or loads
// of what a tile stored before the store.
inline void MemoryBarrier() { __asm__ __volatile__("" ::: "memory"); }

// A block's weight rows repacked for the A tiles: slab[k / 64][32 rows][64 bytes], so that a tile
// load reads 1 KB of consecutive lines. Loaded straight from the matrix (rows K bytes apart) the
// 16 lines of a tile fall into 2 L1 sets at K = 2048 and into 1 at K = 8192: BM_MatMulQ8Dyn
// body 4 (one thread, 2 alternations) took 1.0–1.06× the time at 128 rows and 1.1–1.26× at 512
// that way. A pack before the block's tiles, though, made 128 × 2048 × 2048 take 1.5× the time
// of the unpacked tiles, so the next block is packed while this one computes: a few lines per
// tile step, vector loads and stores beside the tile unit's work.
struct NextPack {
  const int8_t* w = nullptr;  // the next block's first weight row
  int8_t* slab = nullptr;
  size_t K = 0;
  size_t lines = 0;           // rows · K / 64 (0: no next block)
  size_t lines_per_step = 0;  // ceil(lines / steps of this block)

  // Packs lines [first, last) of the block: line l is bytes 64·l .. 64·l + 64 of its rows (which
  // follow each other in the matrix), i.e. row l / (K / 64) at k = 64·(l % (K / 64)).
  [[gnu::always_inline]] SLM_AMX_TARGET void Lines(size_t first, size_t last) const {
    if (first >= last) return;
    size_t m = first / (K / 64), k = first % (K / 64) * 64;
    for (size_t l = first; l < last; ++l) {
      _mm512_storeu_si512(slab + k * 32 + m * 64, _mm512_loadu_si512(w + l * 64));
      k += 64;
      if (k == K) k = 0, ++m;
    }
  }
  // Packs this step's lines and prefetches (into L2) those kPrefetchSteps steps on: the weights
  // come from DRAM, and tile steps queued behind a pack load that missed held up the tile unit
  // (1B 8da8w prefill, 2 threads, one run each: 128 tokens 684 → 825–845 tok/s, 512 tokens 720
  // → 752–773). The first step prefetches the first kPrefetchSteps steps' lines.
  [[gnu::always_inline]] SLM_AMX_TARGET void Step(size_t step) const {
    const size_t first = std::min(lines, step * lines_per_step);
    if (step == 0) Prefetch(0, kPrefetchSteps * lines_per_step);
    Prefetch((step + kPrefetchSteps) * lines_per_step, (step + kPrefetchSteps + 1) * lines_per_step);
    Lines(first, std::min(lines, first + lines_per_step));
  }
  [[gnu::always_inline]] void Prefetch(size_t first, size_t last) const {
    for (size_t l = first; l < std::min(last, lines); ++l) PrefetchDecodeLine(w + l * 64);
  }
  static constexpr size_t kPrefetchSteps = 8;
};

// Nothing to do between tile steps (TileDots of the 8da4w groups: their next block's work goes per
// group).
struct NoStepWork {
  [[gnu::always_inline]] void Step(size_t) const {}
};

// Tiles: C 0..3 (C[2a + b] = A a × B b), A (weights) 4 and 5, B (activation halves) 6 and 7.
// c[m][j] (32 × kP int32) = Σ_{k in [k0, k1)} w[m, k]·x[j, k] for kBlocks·16 weight rows m and the
// panel's rows j, in steps of kq k (the tile configuration's: 64, or 32 for 8da4w G = 32). slab:
// the block's weights as [k / kq][32 rows][kq bytes], so an A tile is 16·kq consecutive bytes.
// work.Step(step0 + i) runs before step i (the next block's pack and prefetches).
template <int kBlocks, class Work>
SLM_AMX_TARGET void TileDots(const int8_t* xt, const int8_t* slab, size_t k0, size_t k1, size_t kq, int32_t* c,
                             const Work& work, size_t step0) {
  MemoryBarrier();
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kBlocks == 2) {
    _tile_zero(2);
    _tile_zero(3);
  }
  const int8_t* a = slab + k0 / kq * 32 * kq;
  for (size_t k = k0; k < k1; k += kq, a += 32 * kq) {
    work.Step(step0++);
    _tile_loadd(4, a, kq);
    _tile_loadd(6, xt + k * kP, kP * 4);  // quads k/4 .. k/4 + kq/4, rows 0..16
    _tile_dpbssd(0, 4, 6);
    _tile_loadd(7, xt + k * kP + 64, kP * 4);  // rows 16..32
    _tile_dpbssd(1, 4, 7);
    if constexpr (kBlocks == 2) {
      _tile_loadd(5, a + 16 * kq, kq);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
  }
  _tile_stored(0, c, kP * 4);
  _tile_stored(1, c + 16, kP * 4);
  if constexpr (kBlocks == 2) {
    _tile_stored(2, c + 16 * kP, kP * 4);
    _tile_stored(3, c + 16 * kP + 16, kP * 4);
  }
  MemoryBarrier();
}

// y[p·kP + j, n + m] = fma(float(c[m][j])·xscale[j], scales[m], bias[m] or 0) for the panel's
// rows j < R and kBlocks·16 weight rows m (Q8PanelTile's epilogue), 16 × 16 at a time,
// transposed in registers so that each row of y gets 16 contiguous columns.
template <int kBlocks>
SLM_AMX_TARGET void WritePanel(const int32_t* c, const float* xscale, const float* scales, const float* bias,
                               float* y, size_t p, size_t R, size_t N) {
  for (int mh = 0; mh < kBlocks; ++mh) {
    for (size_t half = 0; half < kP / 16; ++half) {
      const size_t row0 = p * kP + half * 16;
      if (row0 >= R) break;
      const __m512 xs = _mm512_loadu_ps(xscale + row0);
      __m512i r[16];
      for (int i = 0; i < 16; ++i) {
        const size_t m = size_t(mh * 16 + i);
        const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c + m * kP + half * 16)), xs);
        r[i] = _mm512_castps_si512(_mm512_fmadd_ps(v, _mm512_set1_ps(scales[m]), _mm512_set1_ps(bias ? bias[m] : 0.0f)));
      }
      StoreTransposed(r, y + size_t(mh) * 16, row0, R, N);
    }
  }
}

// Columns [n, n + kBlocks·16) for all R rows from the packed slab; packs `next` meanwhile.
template <int kBlocks>
SLM_AMX_TARGET void Block(const int8_t* xt, const float* xscale, const int8_t* slab, const float* scales,
                          const float* bias, float* y, size_t R, size_t K, size_t N, size_t n, NextPack next,
                          int32_t* c) {
  const size_t panels = (R + kP - 1) / kP, steps = panels * (K / 64);
  next.lines_per_step = (next.lines + steps - 1) / steps;
  for (size_t p = 0; p < panels; ++p) {
    TileDots<kBlocks>(xt + p * kP * K, slab, 0, K, 64, c, next, p * (K / 64));
    WritePanel<kBlocks>(c, xscale, scales + n, bias ? bias + n : nullptr, y + n, p, R, N);
  }
}

// 4 independent accumulator tiles, each tdpbssd a 16 × 16 × 64 product.
SLM_AMX_TARGET double DotLoopBody(int64_t iters, int32_t* sink) {
  _tile_loadconfig(&kTileConfig);
  alignas(64) int8_t operand[16 * 64];
  for (size_t i = 0; i < sizeof(operand); ++i) operand[i] = int8_t(i * 7);
  MemoryBarrier();
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbssd(0, 4, 5);
    _tile_dpbssd(1, 5, 4);
    _tile_dpbssd(2, 4, 5);
    _tile_dpbssd(3, 5, 4);
  }
  alignas(64) int32_t out[16 * 16];
  _tile_stored(0, out, 64);
  MemoryBarrier();
  _tile_release();
  *sink = out[0];
  return double(iters) * 4 * 16 * 16 * 64 * 2;
}

// ---- 8da4w ----
//
// The same tiles with the int4 weights unpacked into the slab as signed q − 8 bytes, one block
// of 32 weight rows at a time, and the 8da4w order of quant_kernels.h (the VNNI panels' and the
// decode tiles'): per group an exact int32 dot — C = Σ (q − 8)·x, from G / kq tile steps of kq k
// (kq = 32 for G = 32, else 64) — folded into f32 accumulators in group order, acc = fma(float(C),
// scale, acc) (symmetric: C is Σ q·x − 8·Σx) or fma(float(gs), offset, fma(float(C + 8·gs),
// scale, acc)) (asymmetric: C + 8·gs is Σ q·x), then fma(acc, xscale, bias or 0). The fold is
// vector code per group on the 4 C tiles stored to L1, so it — not the tile unit — sets the pace
// at G = 32.


struct Q4AmxArgs {
  const int8_t* xt;      // panels of the transposed activations (signed)
  const float* xscale;   // [panels·kP], zeros past R
  const int32_t* gs;     // [panels][groups][kP] group sums (asymmetric groups only)
  const uint8_t* w;
  const float* scales;   // [N, groups]
  const float* offsets;  // [N, groups] or null (symmetric)
  const float* bias;
  float* y;
  size_t R, K, N, G, kq;
  int8_t* slabs[2];  // [K / kq][32][kq]: a block's codes q − 8 (this block's, the next one's)
  int32_t* c;     // [32][kP]: one group's dots
  float* acc;     // [32][kP]
};

// slab[k / kq][m][kq] = q − 8 for the 64-k chunks [c0, c1) of a block at w (chunk c: row
// c / (K / 64), k = 64·(c % (K / 64)); rows K / 2 bytes apart, so chunk c's 32 bytes are at
// w + 32·c). An A tile of kq k is then 16 · kq consecutive bytes. 32 bytes hold two 32-k blocks,
// the low nibbles of block b k 32b..32b+15, its high nibbles k 32b+16..32b+31 (vnni::UnpackQ4Row).
[[gnu::always_inline]] SLM_AMX_TARGET inline void UnpackQ4Chunks(const uint8_t* w, size_t K, size_t kq, int8_t* slab,
                                                                 size_t c0, size_t c1) {
  if (c0 >= c1) return;
  const __m256i mask = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  const size_t half = kq == 32 ? 32 * 32 : 32;  // from k to k + 32: the next 32-k tile, or on in the row
  size_t m = c0 / (K / 64), k = c0 % (K / 64) * 64;
  for (size_t c = c0; c < c1; ++c) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * c));
    const __m256i lo = _mm256_and_si256(v, mask), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
    int8_t* dst = slab + (k / kq) * 32 * kq + m * kq + k % kq;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_sub_epi8(_mm256_permute2x128_si256(lo, hi, 0x20), eight));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + half), _mm256_sub_epi8(_mm256_permute2x128_si256(lo, hi, 0x31), eight));
    k += 64;
    if (k == K) k = 0, ++m;
  }
}

// The next block, unpacked into the other slab a few chunks per group step of this one (as
// NextPack for 8da8w: unpacked before its tiles, the unpack was 10% of the 8da4w prefill and
// waited for DRAM), its codes prefetched kPrefetchSteps steps ahead and its scales over the
// block.
struct NextQ4 {
  const uint8_t* codes = nullptr;  // the next block's first row
  int8_t* slab = nullptr;
  size_t K = 0, kq = 0;
  size_t chunks = 0, chunks_per_step = 0;  // 64-k chunks of the block (rows · K / 64)
  const float* scales = nullptr;
  size_t scale_lines = 0, scale_lines_per_step = 0;
  static constexpr size_t kPrefetchSteps = 8;

  [[gnu::always_inline]] SLM_AMX_TARGET void Step(size_t step) const {
    const size_t c0 = std::min(chunks, step * chunks_per_step), c1 = std::min(chunks, c0 + chunks_per_step);
    if (step == 0) Prefetch(0, kPrefetchSteps * chunks_per_step);
    Prefetch((step + kPrefetchSteps) * chunks_per_step, (step + kPrefetchSteps + 1) * chunks_per_step);
    for (size_t l = step * scale_lines_per_step; l < std::min(scale_lines, (step + 1) * scale_lines_per_step); ++l) {
      PrefetchDecodeLine(reinterpret_cast<const uint8_t*>(scales) + l * 64);
    }
    UnpackQ4Chunks(codes, K, kq, slab, c0, c1);
  }
  // The lines holding chunks [c0, c1) (32 bytes each).
  [[gnu::always_inline]] void Prefetch(size_t c0, size_t c1) const {
    c1 = std::min(c1, chunks);
    for (size_t c = c0 + (c0 % 2); c < c1; c += 2) PrefetchDecodeLine(codes + 32 * c);
  }
};

// acc[m][j] (+)= the group's contribution for kBlocks·16 weight rows m of the block and the
// panel's 32 rows j (see above); scales / offsets: the block's first row's, `groups` apart.
// kAsym: a template argument, so that the symmetric fold is a straight run of loads and FMAs.
template <int kBlocks, bool kAsym>
SLM_AMX_TARGET void FoldGroup(const Q4AmxArgs& s, const int32_t* gs_g, const float* scales, const float* offsets,
                              size_t groups, size_t g) {
  __m512i eight_gs0 = _mm512_setzero_si512(), eight_gs1 = _mm512_setzero_si512();
  __m512 gsf0 = _mm512_setzero_ps(), gsf1 = _mm512_setzero_ps();
  if constexpr (kAsym) {
    const __m512i v0 = _mm512_loadu_si512(gs_g), v1 = _mm512_loadu_si512(gs_g + 16);
    eight_gs0 = _mm512_slli_epi32(v0, 3);
    eight_gs1 = _mm512_slli_epi32(v1, 3);
    gsf0 = _mm512_cvtepi32_ps(v0);
    gsf1 = _mm512_cvtepi32_ps(v1);
  }
  #pragma GCC unroll 32
  for (size_t m = 0; m < size_t(kBlocks) * 16; ++m) {
    const __m512 vs = _mm512_set1_ps(scales[m * groups + g]);
    float* a = s.acc + m * kP;
    const int32_t* c = s.c + m * kP;
    __m512 f0, f1;
    if constexpr (kAsym) {
      f0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_loadu_si512(c), eight_gs0)), vs, _mm512_loadu_ps(a));
      f1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_loadu_si512(c + 16), eight_gs1)), vs, _mm512_loadu_ps(a + 16));
      const __m512 vo = _mm512_set1_ps(offsets[m * groups + g]);
      f0 = _mm512_fmadd_ps(gsf0, vo, f0);
      f1 = _mm512_fmadd_ps(gsf1, vo, f1);
    } else {
      f0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c)), vs, _mm512_loadu_ps(a));
      f1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c + 16)), vs, _mm512_loadu_ps(a + 16));
    }
    _mm512_storeu_ps(a, f0);
    _mm512_storeu_ps(a + 16, f1);
  }
}

// One panel of a block: the groups' tile steps and folds, then y's rows (WritePanel's epilogue
// with acc for float(dot)·xscale: fma(acc, xscale, bias or 0) — written here, not by WritePanel,
// whose operation order is the 8da8w one).
template <int kBlocks>
SLM_AMX_TARGET void Q4Panel(const Q4AmxArgs& s, const int8_t* slab, size_t n, size_t p, const NextQ4& next) {
  const size_t groups = s.K / s.G, kq = s.kq;
  const int8_t* xt = s.xt + p * kP * s.K;
  const float* scales = s.scales + n * groups;
  const float* offsets = s.offsets ? s.offsets + n * groups : nullptr;
  for (size_t i = 0; i < size_t(kBlocks) * 16 * kP; i += 16) _mm512_storeu_ps(s.acc + i, _mm512_setzero_ps());
  for (size_t g = 0; g < groups; ++g) {
    next.Step(p * groups + g);
    TileDots<kBlocks>(xt, slab, g * s.G, (g + 1) * s.G, kq, s.c, NoStepWork{}, 0);
    if (offsets != nullptr) FoldGroup<kBlocks, true>(s, s.gs + (p * groups + g) * kP, scales, offsets, groups, g);
    else FoldGroup<kBlocks, false>(s, nullptr, scales, nullptr, groups, g);
  }
  for (int mh = 0; mh < kBlocks; ++mh) {
    for (size_t half = 0; half < kP / 16; ++half) {
      const size_t row0 = p * kP + half * 16;
      if (row0 >= s.R) break;
      const __m512 xs = _mm512_loadu_ps(s.xscale + row0);
      __m512i r[16];
      for (int i = 0; i < 16; ++i) {
        const size_t m = size_t(mh * 16 + i);
        const __m512 b = _mm512_set1_ps(s.bias ? s.bias[n + m] : 0.0f);
        r[i] = _mm512_castps_si512(_mm512_fmadd_ps(_mm512_loadu_ps(s.acc + m * kP + half * 16), xs, b));
      }
      StoreTransposed(r, s.y + n + size_t(mh) * 16, row0, s.R, s.N);
    }
  }
}
}  // namespace

SLM_AMX_TARGET int64_t MatMulQ4DynPanelAmx(const int8_t* xq, const float* xscale, const int32_t* group_sums,
                                           const uint8_t* w, const float* scales, const float* offsets,
                                           const float* bias, float* y, int64_t R, int64_t K, int64_t N, int64_t G,
                                           int64_t n_begin, int64_t n_end) {
  // G: whole tile steps per group (32, or a multiple of 64).
  if (!AmxAvailable() || K % 64 != 0 || G <= 0 || (G != 32 && G % 64 != 0) || K % G != 0 || n_end - n_begin < 16) {
    return n_begin;
  }
  const size_t rows = size_t(R), k = size_t(K), panels = (rows + kP - 1) / kP, groups = k / size_t(G);
  const size_t xt_bytes = Align64(panels * kP * k), xs_bytes = Align64(panels * kP * sizeof(float));
  const size_t gs_bytes = Align64(panels * groups * kP * sizeof(int32_t)), tile_bytes = 32 * kP * sizeof(int32_t);
  uint8_t* scratch = PanelScratch(xt_bytes + xs_bytes + gs_bytes + 2 * tile_bytes + 2 * 32 * k);
  Q4AmxArgs s{};
  int8_t* xt = reinterpret_cast<int8_t*>(scratch);
  float* xscale_pad = reinterpret_cast<float*>(scratch + xt_bytes);
  int32_t* gs = reinterpret_cast<int32_t*>(scratch + xt_bytes + xs_bytes);
  s.c = reinterpret_cast<int32_t*>(scratch + xt_bytes + xs_bytes + gs_bytes);
  s.acc = reinterpret_cast<float*>(scratch + xt_bytes + xs_bytes + gs_bytes + tile_bytes);
  s.slabs[0] = reinterpret_cast<int8_t*>(scratch + xt_bytes + xs_bytes + gs_bytes + 2 * tile_bytes);
  s.slabs[1] = s.slabs[0] + 32 * k;
  TransposeQuads(xq, rows, k, 0, xt);
  PadToPanels(xscale, rows, panels * kP, xscale_pad);
  if (offsets != nullptr) vnni::GroupSumsToPanels<kP>(group_sums, rows, groups, gs);
  s.xt = xt;
  s.xscale = xscale_pad;
  s.gs = gs;
  s.w = w;
  s.scales = scales;
  s.offsets = offsets;
  s.bias = bias;
  s.y = y;
  s.R = rows;
  s.K = k;
  s.N = size_t(N);
  s.G = size_t(G);
  s.kq = G == 32 ? 32 : 64;
  if (s.kq == 32) _tile_loadconfig(&kTileConfig32);
  else _tile_loadconfig(&kTileConfig);
  size_t n = size_t(n_begin);
  const size_t end = size_t(n_end);
  // Each block unpacked while the one before computes (the first before).
  size_t block = BlockRows(n, end);
  UnpackQ4Chunks(w + n * (k / 2), k, s.kq, s.slabs[0], 0, block * k / 64);
  for (int cur = 0; block != 0; cur ^= 1) {
    const size_t next_n = n + block, next_block = BlockRows(next_n, end), steps = panels * groups;
    NextQ4 next{w + next_n * (k / 2), s.slabs[cur ^ 1], k, s.kq, next_block * k / 64, 0, scales + next_n * groups,
                (next_block * groups * sizeof(float) + 63) / 64, 0};
    next.chunks_per_step = (next.chunks + steps - 1) / steps;
    next.scale_lines_per_step = (next.scale_lines + steps - 1) / steps;
    MemoryBarrier();
    for (size_t p = 0; p < panels; ++p) {
      if (block == 32) Q4Panel<2>(s, s.slabs[cur], n, p, next);
      else Q4Panel<1>(s, s.slabs[cur], n, p, next);
    }
    n = next_n;
    block = next_block;
  }
  _tile_release();
  return int64_t(n);
}

double AmxDotLoop(int64_t iters, int32_t* sink) {
  if (!AmxAvailable()) return 0;
  return DotLoopBody(iters, sink);
}

SLM_AMX_TARGET int64_t MatMulQ8DynPanelAmx(const int8_t* xq, const float* xscale, const int8_t* w,
                                           const float* scales, const float* bias, float* y, int64_t R,
                                           int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  if (!AmxAvailable() || K % 64 != 0 || n_end - n_begin < 16) return n_begin;
  const size_t rows = size_t(R), k = size_t(K), panels = (rows + kP - 1) / kP;
  const size_t xt_bytes = Align64(panels * kP * k), xs_bytes = Align64(panels * kP * sizeof(float));
  const size_t c_bytes = 32 * kP * sizeof(int32_t), slab_bytes = 32 * k;
  uint8_t* scratch = PanelScratch(xt_bytes + xs_bytes + c_bytes + 2 * slab_bytes);
  int8_t* xt = reinterpret_cast<int8_t*>(scratch);
  float* xscale_pad = reinterpret_cast<float*>(scratch + xt_bytes);
  int32_t* c = reinterpret_cast<int32_t*>(scratch + xt_bytes + xs_bytes);
  int8_t* slabs[2] = {reinterpret_cast<int8_t*>(scratch + xt_bytes + xs_bytes + c_bytes),
                      reinterpret_cast<int8_t*>(scratch + xt_bytes + xs_bytes + c_bytes + slab_bytes)};
  TransposeQuads(xq, rows, k, 0, xt);
  PadToPanels(xscale, rows, panels * kP, xscale_pad);
  _tile_loadconfig(&kTileConfig);
  const size_t end = size_t(n_end);
  size_t n = size_t(n_begin), block = BlockRows(n, end);
  NextPack first{w + n * k, slabs[0], k, block * k / 64, 0};
  first.Lines(0, first.lines);
  for (int cur = 0; block != 0; cur ^= 1) {
    const size_t next_n = n + block, next_block = BlockRows(next_n, end);
    const NextPack next{w + next_n * k, slabs[cur ^ 1], k, next_block * k / 64, 0};
    if (block == 32) {
      Block<2>(xt, xscale_pad, slabs[cur], scales, bias, y, rows, k, size_t(N), n, next, c);
    } else {
      Block<1>(xt, xscale_pad, slabs[cur], scales, bias, y, rows, k, size_t(N), n, next, c);
    }
    n = next_n;
    block = next_block;
  }
  // Leaves the tile state in its initial configuration: a context switch then saves none of it.
  _tile_release();
  return int64_t(n);
}

#else  // !SLM_HAVE_AMX_KERNELS

double AmxDotLoop(int64_t, int32_t*) { return 0; }
int64_t MatMulQ8DynPanelAmx(const int8_t*, const float*, const int8_t*, const float*, const float*, float*,
                            int64_t, int64_t, int64_t, int64_t n_begin, int64_t) {
  return n_begin;
}
int64_t MatMulQ4DynPanelAmx(const int8_t*, const float*, const int32_t*, const uint8_t*, const float*, const float*,
                            const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t n_begin, int64_t) {
  return n_begin;
}

#endif  // SLM_HAVE_AMX_KERNELS

}  // namespace slm::kernels
