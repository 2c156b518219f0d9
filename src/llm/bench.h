// `staticlm bench`: prefill and decode throughput of an artifact through the hf_static session
// (the same path `run` uses), load time, peak RSS, and — with the roofline probes — the same
// figures as fractions of this machine's limits (DRAM bandwidth for decode, FMA / int8 peak for
// prefill). Library form so tests and tools share it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace slm::llm {

struct BenchOptions {
  int threads = 0;                          // 0: the machine's core count
  std::vector<int64_t> prompt_lengths = {128};
  int64_t decode_tokens = 128;
  int repeats = 5;
  bool roofline = false;                    // measure bandwidth / FMA / int8 peaks
  double roofline_seconds = 1.0;            // per probe
  uint64_t bandwidth_buffer_bytes = 1ull << 30;
  bool profile = false;                     // time every op of the timed calls (per method)
  // A switch of llm::AbSwitch (bench_ab.h), or "": every repeat then runs twice, with the
  // default kernels and with the switch's variant, one right after the other (alternating which
  // goes first), and the variant's figures and the per-repeat ratios are reported beside the
  // default's.
  std::string ab;
};

struct Spread {
  double median = 0, min = 0, max = 0;
  nlohmann::json ToJson() const { return {{"median", median}, {"min", min}, {"max", max}}; }
};

// Where one method's time goes (--profile): the timed calls' ops grouped by kind, matmuls also
// by weight role ("matmul_q mlp.gate_proj": every layer's gate projection together).
struct MethodProfile {
  struct Entry {
    std::string op;
    double ms_per_call = 0;
    double share = 0;  // of the method's op time
  };
  std::string method;
  int64_t calls = 0;
  double ms_per_call = 0;     // sum of its ops' times
  std::vector<Entry> ops;     // by time, largest first
};

// --ab: the variant's figures, and variant ÷ default of each paired repeat.
struct AbResult {
  std::string name, description;
  std::vector<std::pair<int64_t, Spread>> prefill_tok_s, prefill_ratio;  // per prompt length
  Spread decode_tok_s, decode_ratio;
  std::vector<double> decode_tok_s_per_repeat;
};

struct BenchResult {
  std::string artifact, simd_target, weights;
  std::string cpu;  // CpuModel() (core/cpu_model.h): "" where /proc/cpuinfo names none
  // Where the int8 weight-only Highway decode tile prefetches: "L1" or "L2"
  // (kernels/decode_prefetch.h, Q8DecodePrefetchIntoL1).
  std::string int8_decode_prefetch;
  // Whether the int4 weight-only decode rounds x to 16 bits (kernels/quant_kernels.h,
  // Int4DecodeX16InUse: switched on by SLM_INT4_X16, AVX2 without VNNI).
  bool int4_decode_x16 = false;
  int threads = 0;
  double load_ms = 0;          // Program::Load + session creation (every method ready)
  uint64_t peak_rss_bytes = 0;
  uint64_t artifact_bytes = 0;
  // After the timed calls: the artifact's resident bytes and those in huge pages (ResidencyOf,
  // core/mapped_file.h): a run whose weights sit in 4 KB pages is slower for that reason.
  uint64_t artifact_resident_bytes = 0, artifact_huge_page_bytes = 0;
  uint64_t decode_weight_bytes = 0;   // constants the decode method streams per token
  double decode_kv_bytes = 0;         // mean KV-cache bytes read per decode token
  double flops_per_token = 0;         // decode: 2 · matmul weight elements (attention excluded)
  double prefill_flops_per_token = 0; // a full prefill chunk's matmul FLOPs / its T (the vocab
                                      // matmul runs on the selected row only)
  bool dynamic_int8 = false;          // 8da*: prefill compares with the int8 peak
  // Dynamic (8da4w / 8da8w) products in the prefill methods and a CPU with AMX-INT8: those run
  // on tdpbssd (kernels/matmul_q_amx.h), so prefill is compared with the AMX peak as well.
  bool amx_prefill = false;
  std::vector<std::pair<int64_t, Spread>> prefill_tok_s;  // per prompt length
  Spread decode_tok_s;
  std::vector<double> decode_tok_s_per_repeat;  // in repeat order
  // Roofline (0 when not measured). bandwidth_bytes_s: the best probe of the run.
  double bandwidth_bytes_s = 0, fma_flop_s = 0, int8_op_s = 0;
  double amx_int8_op_s = 0;  // tdpbssd's peak; 0 without AMX
  // Median over the decode repeats of each repeat's rate ÷ the bound from the probes just
  // before and after it (their mean; the first repeat has only the one after): the bandwidth
  // drifts by up to 2× within minutes on a shared VM, so a repeat is compared with the DRAM of
  // its own moment. 0 when not measured.
  double decode_fraction_of_paired_bound = 0;
  std::vector<double> bandwidth_probes_bytes_s;  // before decode repeats 1.., then after the last
  std::string int8_peak_instruction;  // what the int8 probe ran: the dynamic kernels' inner op
  std::vector<MethodProfile> profile;  // --profile only (the default's calls)
  std::optional<AbResult> ab;          // --ab only; every other figure is the default's
  nlohmann::json ToJson() const;
  std::string ToText() const;
};

Result<BenchResult> RunBench(const std::string& artifact_path, const BenchOptions& options);

}  // namespace slm::llm
