#include "llm/bench.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/cpu_model.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "graph/graph.h"
#include "kernels/decode_prefetch.h"
#include "kernels/kernels.h"
#include "kernels/matmul_q_amx.h"
#include "kernels/quant_kernels.h"
#include "kernels/roofline.h"
#include "llm/bench_ab.h"
#include "llm/session.h"
#include "llm/stats.h"
#include "runtime/program.h"

namespace slm::llm {
namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Spread SpreadOf(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

// Deterministic prompt tokens (ids 3..vocab-1), starting with BOS.
std::vector<int32_t> Prompt(int64_t n, int64_t vocab, int32_t bos) {
  std::vector<int32_t> ids;
  ids.reserve(size_t(n));
  ids.push_back(bos);
  for (int64_t i = 1; i < n; ++i) ids.push_back(int32_t(3 + (i * 7919) % std::max<int64_t>(1, vocab - 3)));
  return ids;
}

// K of a matmul op's weight (int4 weights store two per byte).
int64_t MatMulDepth(const graph::Op& op, const graph::Value& w) {
  return op.kind == graph::OpKind::kMatMulQ && op.ints[0] == 4 ? w.shape[1] * 2 : w.shape[1];
}

// FLOPs (2·N·K per row) of one call of a method's matmuls with constant weights, each counted
// over the rows it actually computes: a prefill method with selected logits runs the vocab-sized
// matmul on one row, not on all T.
double MethodMatMulFlops(const graph::Graph& g) {
  double flops = 0;
  for (const graph::Op& op : g.ops) {
    if (op.kind != graph::OpKind::kMatMul && op.kind != graph::OpKind::kMatMulQ) continue;
    const graph::Value& w = g.values[size_t(op.inputs[1])];
    if (w.kind != graph::ValueKind::kConstant) continue;
    const graph::Value& x = g.values[size_t(op.inputs[0])];
    const int64_t k = MatMulDepth(op, w);
    int64_t elements = 1;
    for (int64_t d : x.shape) elements *= d;
    flops += 2.0 * double(w.shape[0]) * double(k) * double(elements / std::max<int64_t>(1, k));
  }
  return flops;
}

// "matmul_q mlp.down_proj" for a matmul (its weight's role, the layer index dropped: every
// layer's projection sums into one entry), the op kind alone for the rest.
std::string ProfileKey(const graph::Op& op) {
  std::string key = graph::OpKindName(op.kind);
  if (op.kind != graph::OpKind::kMatMul && op.kind != graph::OpKind::kMatMulQ) return key;
  std::string role = op.debug;
  const size_t layers = role.find("layers.");
  if (layers != std::string::npos) {
    size_t i = layers + 7;
    while (i < role.size() && std::isdigit(static_cast<unsigned char>(role[i]))) ++i;
    role = role.substr(i < role.size() && role[i] == '.' ? i + 1 : i);
  }
  const size_t rows = role.find(" rows ");  // a slice of a fused weight: "… rows 0+2048"
  if (rows != std::string::npos) role.resize(rows);
  return key + " " + role;
}

class ProfileObserver final : public runtime::OpObserver {
 public:
  void OnOp(const runtime::Method& m, size_t index, const graph::Op& op, int64_t start_ns, int64_t end_ns) override {
    Totals& t = methods_[m.name()];
    if (index == 0) ++t.calls;
    t.ns[ProfileKey(op)] += end_ns - start_ns;
  }
  std::vector<MethodProfile> Profiles() const {
    std::vector<MethodProfile> out;
    for (const auto& [name, t] : methods_) {
      MethodProfile p;
      p.method = name;
      p.calls = std::max<int64_t>(1, t.calls);
      int64_t total = 0;
      for (const auto& [key, ns] : t.ns) total += ns;
      p.ms_per_call = double(total) / 1e6 / double(p.calls);
      for (const auto& [key, ns] : t.ns) {
        p.ops.push_back({key, double(ns) / 1e6 / double(p.calls), total > 0 ? double(ns) / double(total) : 0.0});
      }
      std::sort(p.ops.begin(), p.ops.end(), [](const auto& a, const auto& b) { return a.ms_per_call > b.ms_per_call; });
      out.push_back(std::move(p));
    }
    return out;
  }

 private:
  struct Totals {
    int64_t calls = 0;
    std::map<std::string, int64_t> ns;
  };
  std::map<std::string, Totals> methods_;
};

}  // namespace

nlohmann::json BenchResult::ToJson() const {
  nlohmann::json j;
  j["artifact"] = artifact;
  j["artifact_bytes"] = artifact_bytes;
  j["weights"] = weights;
  j["simd_target"] = simd_target;
  j["cpu"] = cpu;
  j["int8_decode_prefetch"] = int8_decode_prefetch;
  j["int4_decode_x16"] = int4_decode_x16;
  j["threads"] = threads;
  j["load_ms"] = load_ms;
  j["peak_rss_bytes"] = peak_rss_bytes;
  j["artifact_resident_bytes"] = artifact_resident_bytes;
  j["artifact_huge_page_bytes"] = artifact_huge_page_bytes;
  j["decode_weight_bytes"] = decode_weight_bytes;
  j["decode_kv_bytes"] = decode_kv_bytes;
  j["flops_per_token"] = flops_per_token;
  j["prefill_flops_per_token"] = prefill_flops_per_token;
  j["prefill_tok_s"] = nlohmann::json::object();
  for (const auto& [len, s] : prefill_tok_s) j["prefill_tok_s"][std::to_string(len)] = s.ToJson();
  j["decode_tok_s"] = decode_tok_s.ToJson();
  j["decode_tok_s"]["per_repeat"] = decode_tok_s_per_repeat;
  if (bandwidth_bytes_s > 0) {
    const double bound = bandwidth_bytes_s / (double(decode_weight_bytes) + decode_kv_bytes);
    const double peak = dynamic_int8 ? int8_op_s : fma_flop_s;
    j["roofline"] = {{"read_bandwidth_gb_s", bandwidth_bytes_s / 1e9},
                     {"f32_fma_gflop_s", fma_flop_s / 1e9},
                     {"int8_gop_s", int8_op_s / 1e9},
                     {"int8_peak_instruction", int8_peak_instruction},
                     {"decode_bound_tok_s", bound},
                     {"decode_fraction_of_bound", decode_tok_s.median / bound},
                     {"decode_fraction_of_paired_bound", decode_fraction_of_paired_bound},
                     {"prefill_peak", dynamic_int8 ? "int8" : "f32"}};
    nlohmann::json probes = nlohmann::json::array();
    for (double b : bandwidth_probes_bytes_s) probes.push_back(b / 1e9);
    j["roofline"]["read_bandwidth_probes_gb_s"] = probes;
    nlohmann::json pf = nlohmann::json::object();
    for (const auto& [len, s] : prefill_tok_s) pf[std::to_string(len)] = s.median * prefill_flops_per_token / peak;
    j["roofline"]["prefill_fraction_of_peak"] = pf;
    if (amx_prefill && amx_int8_op_s > 0) {
      nlohmann::json pa = nlohmann::json::object();
      for (const auto& [len, s] : prefill_tok_s) pa[std::to_string(len)] = s.median * prefill_flops_per_token / amx_int8_op_s;
      j["roofline"]["amx_int8_gop_s"] = amx_int8_op_s / 1e9;
      j["roofline"]["prefill_fraction_of_amx_peak"] = pa;
    }
  }
  if (ab) {
    nlohmann::json a = {{"switch", ab->name}, {"variant", ab->description}};
    a["prefill_tok_s"] = nlohmann::json::object();
    a["prefill_ratio"] = nlohmann::json::object();
    for (const auto& [len, sp] : ab->prefill_tok_s) a["prefill_tok_s"][std::to_string(len)] = sp.ToJson();
    for (const auto& [len, sp] : ab->prefill_ratio) a["prefill_ratio"][std::to_string(len)] = sp.ToJson();
    a["decode_tok_s"] = ab->decode_tok_s.ToJson();
    a["decode_tok_s"]["per_repeat"] = ab->decode_tok_s_per_repeat;
    a["decode_ratio"] = ab->decode_ratio.ToJson();
    j["ab"] = a;
  }
  if (!profile.empty()) {
    nlohmann::json pj = nlohmann::json::object();
    for (const MethodProfile& p : profile) {
      nlohmann::json ops = nlohmann::json::array();
      for (const auto& e : p.ops) ops.push_back({{"op", e.op}, {"ms_per_call", e.ms_per_call}, {"share", e.share}});
      pj[p.method] = {{"calls", p.calls}, {"ms_per_call", p.ms_per_call}, {"ops", ops}};
    }
    j["profile"] = pj;
  }
  return j;
}

std::string BenchResult::ToText() const {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line, "artifact %s (%.1f MiB, weights %s), %d threads, SIMD %s\n", artifact.c_str(),
                artifact_bytes / 1048576.0, weights.c_str(), threads, simd_target.c_str());
  os << line;
  os << "cpu " << (cpu.empty() ? "(not named in /proc/cpuinfo)" : cpu) << "; int8 decode tile prefetches into "
     << int8_decode_prefetch << "\n";
  if (int4_decode_x16) os << "int4 decode: x rounded to 16 bits per 8 values (SLM_INT4_X16)\n";
  std::snprintf(line, sizeof line, "load %.1f ms, peak RSS %.1f MiB; artifact resident %.1f MiB, %.1f%% of it in huge pages\n",
                load_ms, peak_rss_bytes / 1048576.0, artifact_resident_bytes / 1048576.0,
                artifact_resident_bytes > 0 ? 100.0 * double(artifact_huge_page_bytes) / double(artifact_resident_bytes) : 0.0);
  os << line;
  for (const auto& [len, s] : prefill_tok_s) {
    std::snprintf(line, sizeof line, "prefill %5lld tokens: %8.1f tok/s (min %.1f, max %.1f)\n", (long long)len, s.median, s.min, s.max);
    os << line;
  }
  std::snprintf(line, sizeof line, "decode:               %8.2f tok/s (min %.2f, max %.2f); %.1f MiB weights + %.2f MiB KV read per token\n",
                decode_tok_s.median, decode_tok_s.min, decode_tok_s.max, decode_weight_bytes / 1048576.0, decode_kv_bytes / 1048576.0);
  os << line;
  if (bandwidth_bytes_s > 0) {
    const double bound = bandwidth_bytes_s / (double(decode_weight_bytes) + decode_kv_bytes);
    const double peak = dynamic_int8 ? int8_op_s : fma_flop_s;
    std::snprintf(line, sizeof line, "roofline: read %.1f GB/s, f32 FMA %.1f GFLOP/s, int8 %.1f GOP/s (%s)\n",
                  bandwidth_bytes_s / 1e9, fma_flop_s / 1e9, int8_op_s / 1e9, int8_peak_instruction.c_str());
    os << line;
    if (amx_int8_op_s > 0) {
      std::snprintf(line, sizeof line, "roofline: AMX int8 %.1f GOP/s (tdpbssd)%s\n", amx_int8_op_s / 1e9,
                    amx_prefill ? ": the 8da4w / 8da8w prefill products run on it" : "");
      os << line;
    }
    std::snprintf(line, sizeof line, "decode: %.1f%% of the DRAM bound (%.2f tok/s); %.1f%% of the bound probed around each repeat (median)\n",
                  100 * decode_tok_s.median / bound, bound, 100 * decode_fraction_of_paired_bound);
    os << line;
    for (const auto& [len, s] : prefill_tok_s) {
      std::snprintf(line, sizeof line, "prefill %lld: %.1f%% of the %s peak (%.1f GFLOP/s)\n", (long long)len,
                    100 * s.median * prefill_flops_per_token / peak, dynamic_int8 ? "int8" : "f32 FMA",
                    s.median * prefill_flops_per_token / 1e9);
      os << line;
      if (amx_prefill && amx_int8_op_s > 0) {
        std::snprintf(line, sizeof line, "prefill %lld: %.1f%% of the AMX int8 peak\n", (long long)len,
                      100 * s.median * prefill_flops_per_token / amx_int8_op_s);
        os << line;
      }
    }
  }
  if (ab) {
    std::snprintf(line, sizeof line, "A/B: B = --ab %s (%s), A = the figures above; each repeat ran A and B back to back\n",
                  ab->name.c_str(), ab->description.c_str());
    os << line;
    for (size_t i = 0; i < ab->prefill_tok_s.size(); ++i) {
      const Spread& b = ab->prefill_tok_s[i].second;
      const Spread& q = ab->prefill_ratio[i].second;
      std::snprintf(line, sizeof line, "B prefill %5lld tokens: %8.1f tok/s (min %.1f, max %.1f); B/A %.3f (min %.3f, max %.3f)\n",
                    (long long)ab->prefill_tok_s[i].first, b.median, b.min, b.max, q.median, q.min, q.max);
      os << line;
    }
    std::snprintf(line, sizeof line, "B decode:             %8.2f tok/s (min %.2f, max %.2f); B/A %.3f (min %.3f, max %.3f)\n",
                  ab->decode_tok_s.median, ab->decode_tok_s.min, ab->decode_tok_s.max, ab->decode_ratio.median,
                  ab->decode_ratio.min, ab->decode_ratio.max);
    os << line;
  }
  for (const MethodProfile& p : profile) {
    std::snprintf(line, sizeof line, "profile %s: %lld calls, %.3f ms of ops per call\n", p.method.c_str(),
                  (long long)p.calls, p.ms_per_call);
    os << line;
    double rest_ms = 0, rest_share = 0;
    for (const auto& e : p.ops) {
      if (e.share < 0.005) {  // the long tail in one line
        rest_ms += e.ms_per_call;
        rest_share += e.share;
        continue;
      }
      std::snprintf(line, sizeof line, "  %-40s %9.3f ms %6.1f%%\n", e.op.c_str(), e.ms_per_call, 100 * e.share);
      os << line;
    }
    if (rest_share > 0) {
      std::snprintf(line, sizeof line, "  %-40s %9.3f ms %6.1f%%\n", "(ops under 0.5% each)", rest_ms, 100 * rest_share);
      os << line;
    }
  }
  return os.str();
}

Result<BenchResult> RunBench(const std::string& path, const BenchOptions& opt) {
  if (opt.repeats < 1) return InvalidArgument("bench: -r must be >= 1");
  if (opt.decode_tokens < 1) return InvalidArgument("bench: -n must be >= 1");
  std::optional<AbSwitch> ab;
  if (!opt.ab.empty()) {
    SLM_ASSIGN_OR_RETURN(AbSwitch parsed, AbSwitch::Parse(opt.ab));
    ab = std::move(parsed);
  }
  // The defaults back whichever way this returns.
  struct Restore {
    const std::optional<AbSwitch>& ab;
    ~Restore() {
      if (ab) (void)ab->Select(false);
    }
  } restore{ab};
  ThreadPool::SetDefaultThreadCount(opt.threads);
  BenchResult r;
  r.artifact = path;
  r.threads = ThreadPool::Default().size();
  // "AVX3+VNNI", "AVX2+AVX-VNNI", "NEON+DOTPROD": the Highway target and the intrinsics bodies
  // running beside it.
  r.simd_target = kernels::ActiveSimdTarget();
  if (const std::string bodies = kernels::ActiveIntrinsicBodies(); !bodies.empty()) r.simd_target += "+" + bodies;
  r.cpu = CpuModel();
  r.int8_decode_prefetch = kernels::Q8DecodePrefetchIntoL1() ? "L1" : "L2";
  r.int4_decode_x16 = kernels::Int4DecodeX16InUse();
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) r.artifact_bytes = uint64_t(st.st_size);

  const double t0 = NowMs();
  SLM_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Program> program, runtime::Program::Load(path));
  SLM_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(program));
  r.load_ms = NowMs() - t0;
  const io::ContractMetadata& meta = session->metadata();
  r.weights = meta.model.value("weights_dtype", std::string("float32"));

  // Bytes the decode method streams per token: every constant read by an op other than the
  // embedding lookup (which reads one row), counted once.
  {
    SLM_ASSIGN_OR_RETURN(graph::Graph g, program->artifact().LoadMethod("decode"));
    std::set<int32_t> streamed;
    for (const graph::Op& op : g.ops) {
      const bool lookup = op.kind == graph::OpKind::kEmbedding || op.kind == graph::OpKind::kEmbeddingQ;
      if (op.kind == graph::OpKind::kMatMulQ && op.ints[3] != 0) r.dynamic_int8 = true;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        const graph::Value& v = g.values[size_t(op.inputs[i])];
        if (v.kind != graph::ValueKind::kConstant || (lookup && i >= 1)) continue;
        streamed.insert(v.constant_index);
      }
    }
    for (int32_t c : streamed) r.decode_weight_bytes += program->artifact().constants()[size_t(c)].nbytes;
    r.flops_per_token = MethodMatMulFlops(g);
  }
  // Prefill FLOPs per prompt token: those of the widest prefill method's call over its T rows
  // (the widest is what a long prompt runs through; a full chunk, no padding rows counted).
  {
    const io::MethodInfo* widest = nullptr;
    for (const io::MethodInfo& m : meta.methods) {
      if (m.role == "prefill" && (widest == nullptr || m.step > widest->step)) widest = &m;
    }
    if (widest != nullptr) {
      SLM_ASSIGN_OR_RETURN(graph::Graph g, program->artifact().LoadMethod(widest->name));
      r.prefill_flops_per_token = MethodMatMulFlops(g) / double(widest->step);
      for (const graph::Op& op : g.ops) {
        const bool dynamic = op.kind == graph::OpKind::kMatMulQ && op.ints[3] != 0;
        if (dynamic && kernels::AmxAvailable()) r.amx_prefill = true;
      }
    } else {
      r.prefill_flops_per_token = r.flops_per_token;  // decode-only artifact: prompts go one token at a time
    }
  }

  // Installed for the calls of every repeat but the first (which pays the page faults of a
  // freshly mapped artifact; with one repeat, that one). The 1-token start of a decode repeat
  // is included: it is a decode call like the others.
  ProfileObserver profiler;
  auto profiled = [&](int rep) { return opt.profile && (rep > 0 || opt.repeats == 1); };

  // The roofline probes run around the timed calls and keep their best: this machine's bandwidth
  // and clock drift by tens of percent within a minute, and probed once after the repeats the
  // bandwidth read 29–62 GB/s within one run of the five 1B artifacts, putting 8da8w decode at
  // 103% of "the" bound. The compute peaks are probed before the prefill repeats and at the end,
  // the bandwidth between decode repeats and at the end (its 1 GiB buffer after the peak RSS is
  // taken, so that the RSS stays the artifact's). The best probe gives the printed bound; each
  // decode repeat is also compared with the probes around it (decode_fraction_of_paired_bound):
  // within one run the probes read 29–73 GB/s on this VM, and a repeat in a slow minute measured
  // against the best probe reads as the code's loss.
  ThreadPool& pool = ThreadPool::Default();
  const auto probe_compute = [&] {
    if (!opt.roofline) return;
    r.fma_flop_s = std::max(r.fma_flop_s, kernels::MeasureF32FmaPeak(pool, opt.roofline_seconds));
    r.int8_op_s = std::max(r.int8_op_s, kernels::MeasureInt8DotPeak(pool, opt.roofline_seconds));
    r.amx_int8_op_s = std::max(r.amx_int8_op_s, kernels::MeasureAmxInt8Peak(pool, opt.roofline_seconds));
  };
  std::optional<kernels::ReadBandwidthProbe> bandwidth;  // its buffer: allocated at the first probe
  const auto probe_bandwidth = [&] {
    if (!opt.roofline) return;
    if (!bandwidth) {
      r.peak_rss_bytes = PeakRssBytes();  // before the buffer, so that the RSS stays the artifact's
      bandwidth.emplace(opt.bandwidth_buffer_bytes);
    }
    r.bandwidth_probes_bytes_s.push_back(bandwidth->Measure(pool, opt.roofline_seconds));
    r.bandwidth_bytes_s = std::max(r.bandwidth_bytes_s, r.bandwidth_probes_bytes_s.back());
  };

  // One repeat of a timed call, `run(variant)` returning its rate: with --ab twice, A then B on
  // even repeats and B then A on odd ones (so that a drift within the pair does not always favour
  // one side), the defaults selected again after.
  struct Paired {
    std::vector<double> a, b, b_over_a;  // the default's rates, the variant's, their ratios
  };
  if (ab) r.ab = AbResult{ab->name(), ab->description(), {}, {}, {}, {}, {}};
  const auto paired = [&](int rep, Paired& p, auto&& run) -> Status {
    for (int half = 0; half < (ab ? 2 : 1); ++half) {
      const bool variant = ab && (half == 0) == (rep % 2 == 1);
      if (ab) SLM_RETURN_IF_ERROR(ab->Select(variant));
      SLM_ASSIGN_OR_RETURN(double rate, run(variant));
      (variant ? p.b : p.a).push_back(rate);
    }
    if (!ab) return Status::Ok();
    p.b_over_a.push_back(p.b.back() / p.a.back());
    return ab->Select(false);
  };

  const int64_t vocab = session->vocab_size();
  std::vector<float> logits(static_cast<size_t>(vocab));
  const int32_t bos = int32_t(meta.bos_id.value_or(1));
  probe_compute();
  for (int64_t len : opt.prompt_lengths) {
    if (len < 1 || len > session->max_context_len()) {
      return InvalidArgument("bench: prompt length " + std::to_string(len) + " outside [1, " +
                             std::to_string(session->max_context_len()) + "] (the artifact's context)");
    }
    const std::vector<int32_t> prompt = Prompt(len, vocab, bos);
    Paired rates;
    for (int rep = 0; rep < opt.repeats; ++rep) {
      SLM_RETURN_IF_ERROR(paired(rep, rates, [&](bool variant) -> Result<double> {
        session->Reset();
        std::optional<runtime::ScopedOpObserver> profiling;
        if (profiled(rep) && !variant) profiling.emplace(&profiler);
        const double s = NowMs();
        SLM_RETURN_IF_ERROR(session->Feed(prompt, logits));
        return double(len) / ((NowMs() - s) / 1000.0);
      }));
    }
    r.prefill_tok_s.push_back({len, SpreadOf(rates.a)});
    if (ab) {
      r.ab->prefill_tok_s.push_back({len, SpreadOf(rates.b)});
      r.ab->prefill_ratio.push_back({len, SpreadOf(rates.b_over_a)});
    }
  }

  // Decode: n single-token steps after a 1-token start, positions 1..n.
  const int64_t n = std::min<int64_t>(opt.decode_tokens, session->max_context_len() - 1);
  Paired decode;
  for (int rep = 0; rep < opt.repeats; ++rep) {
    if (rep > 0) probe_bandwidth();
    SLM_RETURN_IF_ERROR(paired(rep, decode, [&](bool variant) -> Result<double> {
      session->Reset();
      std::optional<runtime::ScopedOpObserver> profiling;
      if (profiled(rep) && !variant) profiling.emplace(&profiler);
      const int32_t first = bos;
      SLM_RETURN_IF_ERROR(session->Feed(std::span<const int32_t>(&first, 1), logits));
      const double s = NowMs();
      for (int64_t i = 0; i < n; ++i) {
        const int32_t tok = int32_t(3 + (i * 31) % std::max<int64_t>(1, vocab - 3));
        SLM_RETURN_IF_ERROR(session->Feed(std::span<const int32_t>(&tok, 1), logits));
      }
      return double(n) / ((NowMs() - s) / 1000.0);
    }));
  }
  const std::vector<double>& rates = decode.a;
  r.decode_tok_s = SpreadOf(rates);
  r.decode_tok_s_per_repeat = rates;
  if (ab) {
    r.ab->decode_tok_s = SpreadOf(decode.b);
    r.ab->decode_tok_s_per_repeat = decode.b;
    r.ab->decode_ratio = SpreadOf(decode.b_over_a);
  }
  if (opt.profile) r.profile = profiler.Profiles();
  // KV read per decode token: K and V of every layer over the visible positions (mean 1 + n/2);
  // int8 caches read one byte per element plus one f32 scale per (position, head) row.
  const bool q8_cache = meta.cache_format == io::kCacheFormatInt8;
  for (const io::CacheLayer& l : meta.layers) {
    const double row_bytes = q8_cache ? double(l.head_dim) + 4.0 : double(l.head_dim) * 4.0;
    r.decode_kv_bytes += 2.0 * double(l.n_kv_heads) * row_bytes * (1.0 + double(n) / 2.0);
  }
  if (!opt.roofline) r.peak_rss_bytes = PeakRssBytes();  // with --roofline: taken by the first probe
  const MappingResidency residency = ResidencyOf(program->artifact().file_data(), program->artifact().file_size());
  r.artifact_resident_bytes = residency.resident_bytes;
  r.artifact_huge_page_bytes = residency.huge_page_bytes;

  probe_bandwidth();
  probe_compute();
  if (opt.roofline) {
    // Probe k (k < repeats - 1) ran just before repeat k + 1, the last one after the last repeat.
    std::vector<double> fractions;
    const double bytes_per_token = double(r.decode_weight_bytes) + r.decode_kv_bytes;
    for (size_t rep = 0; rep < rates.size(); ++rep) {
      const double after = r.bandwidth_probes_bytes_s[rep];
      const double around = rep == 0 ? after : (r.bandwidth_probes_bytes_s[rep - 1] + after) / 2;
      fractions.push_back(rates[rep] * bytes_per_token / around);
    }
    r.decode_fraction_of_paired_bound = SpreadOf(fractions).median;
    r.int8_peak_instruction = kernels::Int8PeakInstruction();
  }
  return r;
}

}  // namespace slm::llm
