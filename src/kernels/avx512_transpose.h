// 32-bit transposes for the AVX-512 int8 panel GEMMs (matmul_q_vnni_panel.cc, matmul_q_amx.cc):
// the activations of a prefill chunk regrouped so that one vector (VNNI) or one tile row (AMX)
// holds the same 4 consecutive k of 16 rows.
#pragma once

#include "kernels/matmul_q_vnni.h"
#include "kernels/vnni_intrinsics.h"

#if SLM_HAVE_VNNI_KERNELS
namespace slm::kernels::vnni {

// Rows per panel of transposed activations: 2 vectors (or 2 AMX tiles) of 16 int32 lanes.
constexpr size_t kQuadPanelRows = size_t(kVnniPanelRows);
static_assert(kQuadPanelRows == 32);

// In place: r[j] lane i becomes r[i] lane j (a 16×16 transpose of 32-bit elements).
SLM_VNNI_TARGET inline void Transpose16x16(__m512i (&r)[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {  // per 128-bit lane: pairs of rows interleaved
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4g + e]: 128-bit lane L holds column 4L + e of rows 4g .. 4g + 3.
  __m512i u[16];
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  // Column 4L + e = lane L of u[e], u[4 + e], u[8 + e], u[12 + e]: a 4×4 transpose of lanes.
  for (int e = 0; e < 4; ++e) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x44), v1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x44), v3 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xEE);
    r[e] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[4 + e] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    r[8 + e] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

// xt[p][q][j] (4 bytes) = xq[p·32 + j, 4q .. 4q + 3] XOR `flip` per byte (0x80: x + 128 as
// unsigned bytes; 0: as is), rows >= R as x = 0. K % 64 == 0: blocks of 16 rows × 16 quads are
// transposed in registers (the scalar 4-byte copies were 2% of a prefill, and every thread of a
// matmul does this for the whole x).
SLM_VNNI_TARGET inline void TransposeQuads(const int8_t* xq, size_t R, size_t K, uint8_t flip, int8_t* xt) {
  const size_t panels = (R + kQuadPanelRows - 1) / kQuadPanelRows;
  const __m512i flips = _mm512_set1_epi8(char(flip));
  for (size_t p = 0; p < panels; ++p) {
    int8_t* dst = xt + p * K * kQuadPanelRows;
    for (size_t half = 0; half < kQuadPanelRows / 16; ++half) {
      const size_t row0 = p * kQuadPanelRows + half * 16;
      for (size_t k = 0; k < K; k += 64) {
        __m512i r[16];
        for (size_t i = 0; i < 16; ++i) {
          r[i] = row0 + i < R ? _mm512_xor_si512(_mm512_loadu_si512(xq + (row0 + i) * K + k), flips) : flips;
        }
        Transpose16x16(r);
        for (size_t c = 0; c < 16; ++c) _mm512_storeu_si512(dst + ((k / 4 + c) * kQuadPanelRows + half * 16) * 4, r[c]);
      }
    }
  }
}

}  // namespace slm::kernels::vnni
#endif  // SLM_HAVE_VNNI_KERNELS
