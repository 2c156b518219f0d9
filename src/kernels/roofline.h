// Machine-limit probes for `staticlm bench --roofline`: how fast this CPU can stream memory and
// issue f32 FMAs / int8 multiply-adds on the dispatched SIMD target. Each probe runs for about
// `seconds` and returns the best rate over its repetitions.
#pragma once

#include <cstdint>

#include "core/aligned_buffer.h"

namespace slm {
class ThreadPool;
}

namespace slm::kernels {

// Streaming-read bandwidth in bytes/s: every pool thread sums its slice of a `bytes` buffer
// (pick >> last-level cache), repeatedly. The buffer is allocated and touched once, so that
// probing again (bench probes between its timed calls) costs no new page faults.
class ReadBandwidthProbe {
 public:
  explicit ReadBandwidthProbe(uint64_t bytes);
  double Measure(ThreadPool& pool, double seconds);

 private:
  int64_t n_;  // floats, a multiple of 64
  Buffer buf_;
};
// f32 FMA peak in FLOP/s (2 per lane per FMA) over all pool threads: independent register
// accumulator chains, no memory traffic.
double MeasureF32FmaPeak(ThreadPool& pool, double seconds);
// int8 multiply-add peak in OP/s (2 per int8 product) over all pool threads, with the
// instruction the dynamic-activation kernels' prefill uses (Int8PeakInstruction()).
double MeasureInt8DotPeak(ThreadPool& pool, double seconds);
// That instruction, as the dispatch chooses it now: "vpdpbusd" (AVX-512 VNNI), "vpdpbusd
// (256-bit, AVX-VNNI)", "smmla" / "sdot" (Arm), else "int16 multiply-add" (the Highway sequence:
// int8 → int16 widen, pairwise multiply-add into int32).
const char* Int8PeakInstruction();
// AMX tdpbssd peak in OP/s over all pool threads (4 independent tile chains per thread), which
// the 8da4w / 8da8w prefill products run on where the CPU has AMX-INT8 (matmul_q_amx.h); 0
// without AMX.
double MeasureAmxInt8Peak(ThreadPool& pool, double seconds);

}  // namespace slm::kernels
