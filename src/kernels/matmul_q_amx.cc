// AMX panel GEMM for the prefill-shaped 8da8w products (see matmul_q_amx.h).
//
// tdpbssd C += A·B multiplies signed bytes by signed bytes: A is 16 rows × 64 bytes (k), B is 16
// rows of 4 consecutive k × 16 columns (the "VNNI layout"), C 16 × 16 int32. The weights are
// the A operand as stored (row n, 64 k per tile row; tile rows K bytes apart), so nothing of the
// weights is repacked. The activations of the call are transposed once into the VNNI panels'
// layout (avx512_transpose.h: xt[panel][k/4][32 rows][4 bytes]), which is the B layout: a B tile
// is 16 consecutive quads of 16 rows, 128 bytes apart. A block of 32 weight rows and a panel of
// 32 activation rows keep 4 C tiles over the whole K (2 A + 2 B + 4 C = the 8 tiles); C holds
// dot[weight row][activation row], so the epilogue transposes 16 × 16 results in registers to
// write rows of y. The integer dot is exact and the epilogue is the VNNI panels' (Q8PanelTile),
// so the results have the same bits as every other 8da8w path.
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
  if (!amx_tile || !amx_int8 || !VnniAvailable()) return false;
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

bool AmxAvailable() { return amx.Available(); }
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

// Palette 1, every tile 16 rows of 64 bytes. A constant in read-only data: GCC 12's
// _tile_loadconfig tells the compiler it reads 8 bytes of the struct, so a local one could be
// loaded before its other stores were made.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64);
constexpr TileConfig kTileConfig{};

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

// Tiles: C 0..3 (C[2a + b] = A a × B b), A (weights) 4 and 5, B (activation halves) 6 and 7.
// c[m][j] (32 × kP int32) = Σ_k w[m, k]·x[j, k] for kBlocks·16 weight rows m (the packed slab)
// and the panel's rows j. step0: this panel's first step within the block, for the next pack.
template <int kBlocks>
SLM_AMX_TARGET void DotTiles(const int8_t* xt, const int8_t* slab, size_t K, int32_t* c, const NextPack& next,
                             size_t step0) {
  MemoryBarrier();
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kBlocks == 2) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (size_t k = 0; k < K; k += 64) {
    next.Step(step0 + k / 64);
    _tile_loadd(4, slab + k * 32, 64);
    _tile_loadd(6, xt + k * kP, kP * 4);  // quads k/4 .. k/4 + 16, rows 0..16
    _tile_dpbssd(0, 4, 6);
    _tile_loadd(7, xt + k * kP + 64, kP * 4);  // rows 16..32
    _tile_dpbssd(1, 4, 7);
    if constexpr (kBlocks == 2) {
      _tile_loadd(5, slab + k * 32 + 1024, 64);
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
      Transpose16x16(r);  // r[j]: row row0 + j, weight rows mh·16 .. mh·16 + 16
      const size_t rows = std::min<size_t>(16, R - row0);
      for (size_t j = 0; j < rows; ++j) _mm512_storeu_si512(y + (row0 + j) * N + size_t(mh) * 16, r[j]);
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
    DotTiles<kBlocks>(xt + p * kP * K, slab, K, c, next, p * (K / 64));
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
}  // namespace

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
  // Blocks of 32 weight rows, then one of 16 if 16 are left.
  auto block_rows = [end](size_t at) -> size_t { return at + 32 <= end ? 32 : at + 16 <= end ? 16 : 0; };
  size_t n = size_t(n_begin), block = block_rows(n);
  NextPack first{w + n * k, slabs[0], k, block * k / 64, 0};
  first.Lines(0, first.lines);
  for (int cur = 0; block != 0; cur ^= 1) {
    const size_t next_n = n + block, next_block = block_rows(next_n);
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

#endif  // SLM_HAVE_AMX_KERNELS

}  // namespace slm::kernels
