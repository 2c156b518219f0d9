#include "quant/quantize.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>

#include "core/thread_pool.h"
#include "kernels/quant_kernels.h"
#include "quant/awq.h"
#include "quant/calibration_stats.h"
#include "quant/gptq.h"
#include "quant/quant_math.h"

namespace slm::quant {
namespace {

using graph::Graph;
using graph::OpKind;
using graph::Value;
using graph::ValueKind;

bool IsInt4(Scheme s) { return s == Scheme::kInt4 || s == Scheme::k8da4w; }
bool IsDynamic(Scheme s) { return s == Scheme::k8da8w || s == Scheme::k8da4w; }

// The weight-only scheme with the same weight format (embeddings are never dynamic).
Scheme WeightOnly(Scheme s) {
  if (s == Scheme::k8da8w) return Scheme::kInt8;
  if (s == Scheme::k8da4w) return Scheme::kInt4;
  return s;
}
// int4 → int8 in the same activation mode, for tensors whose K the group does not divide.
Scheme Int8Variant(Scheme s) { return IsDynamic(s) ? Scheme::k8da8w : Scheme::kInt8; }

// The name overrides may use for the lm_head whatever its constant is called (tied checkpoints).
constexpr char kLmHeadName[] = "lm_head.weight";

bool Matches(const std::string& pattern, const std::string& name) {
  if (pattern.rfind("re:", 0) == 0) {
    try {
      return std::regex_match(name, std::regex(pattern.substr(3)));
    } catch (const std::regex_error&) {
      return false;  // rejected earlier by ParseOverride
    }
  }
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

template <typename T>
std::shared_ptr<const graph::ConstantSource> Owned(const std::vector<T>& v, std::string what) {
  std::vector<uint8_t> bytes(v.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return std::make_shared<graph::OwnedConstant>(std::move(bytes), std::move(what));
}

// One quantized tensor, shared by every graph (and every use) that needs it in this scheme.
struct Entry {
  SchemeSpec spec;
  QuantizedMatrix m;
  std::shared_ptr<const graph::ConstantSource> q, scales, offsets;
  size_t report_index = 0;
  bool gptq = false;  // values chosen by GPTQ (named apart from an RTN copy of the same weight)
};

// Drops constants no op or signature references, renumbering value ids.
void RemoveUnusedConstants(Graph& g) {
  std::vector<bool> used(g.values.size(), false);
  for (const auto& op : g.ops) {
    for (int32_t id : op.inputs) used[size_t(id)] = true;
    for (int32_t id : op.outputs) used[size_t(id)] = true;
  }
  for (int32_t id : g.inputs) used[size_t(id)] = true;
  for (int32_t id : g.outputs) used[size_t(id)] = true;
  std::vector<int32_t> remap(g.values.size(), -1);
  std::vector<Value> kept;
  for (size_t i = 0; i < g.values.size(); ++i) {
    if (g.values[i].kind == ValueKind::kConstant && !used[i]) continue;
    remap[i] = int32_t(kept.size());
    kept.push_back(std::move(g.values[i]));
  }
  g.values = std::move(kept);
  for (auto& op : g.ops) {
    for (int32_t& id : op.inputs) id = remap[size_t(id)];
    for (int32_t& id : op.outputs) id = remap[size_t(id)];
  }
  for (int32_t& id : g.inputs) id = remap[size_t(id)];
  for (int32_t& id : g.outputs) id = remap[size_t(id)];
}

}  // namespace

Result<SchemeSpec> ParseScheme(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  for (std::string p; std::getline(ss, p, '-');) parts.push_back(p);
  if (parts.empty()) return InvalidArgument("quantization scheme is empty");
  SchemeSpec s;
  const std::string& base = parts[0];
  if (base == "none" || base == "f32" || base == "float32") s.scheme = Scheme::kNone;
  else if (base == "int8") s.scheme = Scheme::kInt8;
  else if (base == "int4") s.scheme = Scheme::kInt4;
  else if (base == "8da8w") s.scheme = Scheme::k8da8w;
  else if (base == "8da4w") s.scheme = Scheme::k8da4w;
  else return InvalidArgument("quantization scheme '" + text + "': unknown '" + base + "', expected none, int8, int4, 8da8w or 8da4w");
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p == "asym") {
      s.asymmetric = true;
    } else if (p == "sym") {
      s.asymmetric = false;
    } else if (p.size() > 1 && p[0] == 'g' && std::all_of(p.begin() + 1, p.end(), ::isdigit)) {
      s.group = std::stoll(p.substr(1));
    } else {
      return InvalidArgument("quantization scheme '" + text + "': unknown suffix '" + p + "', expected gNN, asym or sym");
    }
  }
  if (IsInt4(s.scheme) && s.group != 32 && s.group != 64 && s.group != 128) {
    return InvalidArgument("quantization scheme '" + text + "': group " + std::to_string(s.group) + ", expected 32, 64 or 128");
  }
  if (!IsInt4(s.scheme) && s.asymmetric) {
    return InvalidArgument("quantization scheme '" + text + "': asym applies to int4 / 8da4w only (int8 is symmetric per channel)");
  }
  return s;
}

Result<Method> ParseMethod(const std::string& text) {
  if (text == "rtn") return Method::kRtn;
  if (text == "gptq") return Method::kGptq;
  if (text == "awq") return Method::kAwq;
  if (text == "awq+gptq") return Method::kAwqGptq;
  return InvalidArgument("quantization method '" + text + "': expected rtn, gptq, awq or awq+gptq");
}

const char* MethodName(Method m) {
  switch (m) {
    case Method::kRtn: return "rtn";
    case Method::kGptq: return "gptq";
    case Method::kAwq: return "awq";
    case Method::kAwqGptq: return "awq+gptq";
  }
  return "?";
}

nlohmann::json MethodOptionsJson(const QuantConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  if (UsesGptqValues(config.method)) {
    j["gptq"] = {{"percdamp", config.gptq.percdamp}, {"block_size", config.gptq.block_size},
                 {"act_order", config.gptq.act_order}, {"clip_search", config.gptq.clip_search}};
  }
  if (UsesAwqScaling(config.method)) {
    j["awq"] = {{"grid", config.awq.grid}, {"max_search_rows", config.awq.max_search_rows}};
  }
  return j;
}

std::string SchemeName(const SchemeSpec& s) {
  switch (s.scheme) {
    case Scheme::kNone: return "none";
    case Scheme::kInt8: return "int8";
    case Scheme::k8da8w: return "8da8w";
    case Scheme::kInt4:
    case Scheme::k8da4w:
      return std::string(s.scheme == Scheme::kInt4 ? "int4" : "8da4w") + "-g" + std::to_string(s.group) +
             (s.asymmetric ? "-asym" : "");
  }
  return "?";
}

Result<std::pair<std::string, SchemeSpec>> ParseOverride(const std::string& text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--quant-override '" + text + "': expected PATTERN=SCHEME, e.g. '*.down_proj.weight=int8'");
  }
  std::string pattern = text.substr(0, eq);
  if (pattern.rfind("re:", 0) == 0) {
    try {
      std::regex re(pattern.substr(3));
    } catch (const std::regex_error& e) {
      return InvalidArgument("--quant-override '" + text + "': bad regex: " + e.what());
    }
  }
  SLM_ASSIGN_OR_RETURN(SchemeSpec s, ParseScheme(text.substr(eq + 1)));
  return std::make_pair(std::move(pattern), s);
}

QuantizedMatrix QuantizeInt8PerChannel(const float* w, int64_t n, int64_t k) {
  QuantizedMatrix m;
  m.bits = 8;
  m.n = n;
  m.k = k;
  m.q.resize(size_t(n * k));
  m.scales.resize(size_t(n));
  for (int64_t r = 0; r < n; ++r) {
    const float* wr = w + r * k;
    const float s = detail::Int8Scale(wr, k);
    m.scales[size_t(r)] = s;
    for (int64_t i = 0; i < k; ++i) m.q[size_t(r * k + i)] = uint8_t(int8_t(detail::Int8Code(wr[i], s)));
  }
  return m;
}

QuantizedMatrix QuantizeInt4Groups(const float* w, int64_t n, int64_t k, int64_t group,
                                   bool asymmetric, bool search_range) {
  QuantizedMatrix m;
  m.bits = 4;
  m.n = n;
  m.k = k;
  m.group = group;
  const int64_t groups = k / group;
  m.q.assign(size_t(n * k / 2), 0);
  m.scales.resize(size_t(n * groups));
  if (asymmetric) m.offsets.resize(size_t(n * groups));
  // Rows are independent (each writes only its own codes, scales and offsets); the range search
  // costs ~60 ns per weight, so a billion-weight model is split over the machine's cores.
  ThreadPool::Default().ParallelFor(n, 1, [&](int64_t r_begin, int64_t r_end) {
    for (int64_t r = r_begin; r < r_end; ++r) {
      uint8_t* row = m.q.data() + r * (k / 2);
      for (int64_t g = 0; g < groups; ++g) {
        const float* wg = w + r * k + g * group;
        const detail::Int4Params p = search_range ? detail::Int4SearchGroupParams(wg, group, asymmetric)
                                                  : detail::Int4GroupParams(wg, group, asymmetric);
        m.scales[size_t(r * groups + g)] = p.scale;
        if (asymmetric) m.offsets[size_t(r * groups + g)] = p.offset;
        for (int64_t i = 0; i < group; ++i) detail::SetQ4(row, g * group + i, detail::Int4Code(wg[i], p, asymmetric));
      }
    }
  });
  return m;
}

QuantizedMatrix QuantizeMatrix(const float* w, int64_t n, int64_t k, const SchemeSpec& spec, bool search_range) {
  return IsInt4(spec.scheme) ? QuantizeInt4Groups(w, n, k, spec.group, spec.asymmetric, search_range)
                             : QuantizeInt8PerChannel(w, n, k);
}

Result<std::vector<float>> ReadF32Constant(const Value& v) {
  SLM_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(v.shape));
  std::vector<float> data(static_cast<size_t>(n));
  Status s = v.source->Read(reinterpret_cast<uint8_t*>(data.data()), uint64_t(n) * 4);
  if (!s.ok()) return Status(s.code(), "quantization: reading '" + v.name + "': " + s.message());
  return data;
}

std::vector<float> Dequantize(const QuantizedMatrix& m) {
  std::vector<float> out(static_cast<size_t>(m.n * m.k));
  for (int64_t r = 0; r < m.n; ++r) {
    if (m.bits == 8) {
      kernels::DequantizeRowQ8(reinterpret_cast<const int8_t*>(m.q.data()), m.scales.data(), m.k, r, 1.0f, out.data() + r * m.k);
    } else {
      kernels::DequantizeRowQ4(m.q.data(), m.scales.data(), m.offsets.empty() ? nullptr : m.offsets.data(), m.k,
                               m.group, r, 1.0f, out.data() + r * m.k);
    }
  }
  return out;
}

double SqnrDb(const float* ref, const float* got, size_t n) {
  double sig = 0, err = 0;
  for (size_t i = 0; i < n; ++i) {
    sig += double(ref[i]) * ref[i];
    const double d = double(ref[i]) - got[i];
    err += d * d;
  }
  if (err == 0) return std::numeric_limits<double>::infinity();
  if (sig == 0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(sig / err);
}

nlohmann::json QuantReport::ToJson() const {
  nlohmann::json j;
  j["schemes"] = nlohmann::json::object();
  j["tensors"] = nlohmann::json::array();
  for (const TensorReport& t : tensors) {
    j["schemes"][t.name + (t.use == "embedding" ? "#embedding" : "")] = t.scheme;
    nlohmann::json e = {{"name", t.name}, {"use", t.use}, {"scheme", t.scheme}, {"shape", t.shape},
                        {"f32_bytes", t.f32_bytes}, {"quant_bytes", t.quant_bytes},
                        {"weight_sqnr_db", std::isfinite(t.weight_sqnr_db) ? nlohmann::json(t.weight_sqnr_db) : nlohmann::json(nullptr)}};
    if (!t.note.empty()) e["note"] = t.note;
    if (t.use != "embedding") e["method"] = t.method;
    if (!std::isnan(t.output_sqnr_db)) {
      auto db = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
      e["output_sqnr_db"] = db(t.output_sqnr_db);
      e["rtn_output_sqnr_db"] = db(t.rtn_output_sqnr_db);
      e["calibration_rows"] = t.calibration_rows;
    }
    j["tensors"].push_back(std::move(e));
  }
  j["f32_bytes"] = f32_bytes;
  j["quant_bytes"] = quant_bytes;
  return j;
}

std::string QuantReport::ToText() const {
  std::ostringstream os;
  char line[512];
  for (const TensorReport& t : tensors) {
    std::snprintf(line, sizeof line, "%-56s %-9s %-16s %10.2f MiB -> %8.2f MiB  SQNR %6.2f dB", t.name.c_str(),
                  t.use.c_str(), t.scheme.c_str(), t.f32_bytes / 1048576.0, t.quant_bytes / 1048576.0,
                  t.weight_sqnr_db);
    os << line;
    if (!std::isnan(t.output_sqnr_db)) {
      // Output SQNR on the calibration activations: round-to-nearest → what was stored.
      std::snprintf(line, sizeof line, "  out %6.2f -> %6.2f dB (%s)", t.rtn_output_sqnr_db, t.output_sqnr_db,
                    t.method.c_str());
      os << line;
    }
    os << (t.note.empty() ? "" : "  ") << t.note << "\n";
  }
  std::snprintf(line, sizeof line, "quantized %zu tensors: %.2f MiB -> %.2f MiB\n", tensors.size(),
                f32_bytes / 1048576.0, quant_bytes / 1048576.0);
  os << line;
  return os.str();
}

Result<QuantReport> QuantizeGraphs(std::vector<graph::Graph>& graphs, const QuantConfig& config,
                                   const CalibrationStats* stats) {
  if (config.method != Method::kRtn && stats == nullptr) {
    return InvalidArgument(std::string("quantization method ") + MethodName(config.method) +
                           " needs calibration activations: give calibration samples "
                           "(CLI --calibration FILE; pipeline: quantization.calibration)");
  }
  if (config.embeddings.scheme != Scheme::kNone && IsDynamic(config.embeddings.scheme)) {
    return InvalidArgument("--quant-embeddings: embeddings take int8 or int4 (weight-only), not " + SchemeName(config.embeddings));
  }
  QuantReport report;
  std::map<std::string, std::unique_ptr<Entry>> entries;  // by "name|shape|scheme"

  // Resolves the scheme of one use of a weight; kNone = leave it. The lm_head answers to
  // "lm_head.weight" too: when it is tied to the embedding table its constant carries the table's
  // name, and a user naming the lm_head should not have to know that.
  std::vector<bool> override_used(config.overrides.size(), false);
  auto choose = [&](const std::string& name, const std::string& use) {
    for (size_t i = 0; i < config.overrides.size(); ++i) {
      const std::string& pattern = config.overrides[i].first;
      if (Matches(pattern, name) || (use == "lm_head" && Matches(pattern, kLmHeadName))) {
        override_used[i] = true;
        return config.overrides[i].second;
      }
    }
    if (use == "embedding") return config.embeddings;
    if (use == "lm_head") return config.quantize_lm_head ? config.linear : SchemeSpec{};
    return config.linear;
  };

  // int4 whose group does not divide K → the int8 form of the same activation mode.
  auto resolve = [&](const Value& w, SchemeSpec spec, const std::string& use, std::string* note) {
    const int64_t k = w.shape[1];
    if (IsInt4(spec.scheme) && k % spec.group != 0) {
      const SchemeSpec fallback{use == "embedding" ? Scheme::kInt8 : Int8Variant(spec.scheme)};
      *note = "K=" + std::to_string(k) + " not a multiple of group " + std::to_string(spec.group) + ": " +
              SchemeName(fallback) + " instead";
      return fallback;
    }
    return spec;
  };

  // AWQ rescales the f32 weights (and the ops feeding them) first; everything below then sees
  // the scaled model (and, per weight, the statistics of its scaled input).
  std::optional<AwqResult> awq;
  const bool gptq_values = UsesGptqValues(config.method);
  if (UsesAwqScaling(config.method)) {
    AwqOptions options = config.awq;
    options.clip_search = config.clip_search;
    auto scheme_of = [&](const Value& w) {
      std::string unused;
      return resolve(w, choose(w.name, "linear"), "linear", &unused);
    };
    SLM_ASSIGN_OR_RETURN(awq, ApplyAwqScaling(graphs, *stats, scheme_of, options));
  }

  // Keyed by the weight format only (int8 ≡ 8da8w weights, int4-gG ≡ 8da4w-gG), so uses that
  // differ only in the activation mode share one stored tensor.
  auto get_entry = [&](const Value& w, const SchemeSpec& spec, const std::string& use,
                       std::string note) -> Result<Entry*> {
    const int64_t n = w.shape[0], k = w.shape[1];
    SchemeSpec format = spec;
    format.scheme = WeightOnly(spec.scheme);
    // Calibration statistics of this weight's input (none for embedding lookups).
    const InputHessian* hessian = nullptr;
    if (stats != nullptr && use != "embedding") {
      hessian = stats->Find(w.name);
      if (hessian != nullptr && (hessian->k != k || hessian->rows == 0)) hessian = nullptr;
    }
    const bool gptq = gptq_values && use != "embedding" && hessian != nullptr;
    if (gptq_values && use != "embedding" && hessian == nullptr) {
      note += std::string(note.empty() ? "" : "; ") + "no calibration activations reached it: rtn instead of gptq";
    }
    // GPTQ values differ from RTN's, so a GPTQ lm_head never shares the RTN embedding's copy.
    const std::string key = w.name + "|" + ShapeToString(w.shape) + "|" + SchemeName(format) + (gptq ? "|gptq" : "");
    auto it = entries.find(key);
    if (it != entries.end()) return it->second.get();
    SLM_ASSIGN_OR_RETURN(std::vector<float> f, ReadF32Constant(w));
    auto e = std::make_unique<Entry>();
    e->spec = format;
    e->gptq = gptq;
    e->m = QuantizeMatrix(f.data(), n, k, spec, config.clip_search);
    std::vector<float> deq = Dequantize(e->m);
    // The statistics of this weight's input as the (AWQ-scaled) model sees it.
    std::vector<double> scaled_h;
    const double* h = hessian != nullptr ? hessian->h.data() : nullptr;
    if (hessian != nullptr && awq && awq->input_scales.count(w.name)) {
      scaled_h = ScaledHessian(*hessian, awq->input_scales.at(w.name));
      h = scaled_h.data();
    }
    TensorReport t;
    if (hessian != nullptr) {
      t.rtn_output_sqnr_db = t.output_sqnr_db = OutputSqnrDb(f.data(), deq.data(), n, k, h);
      t.calibration_rows = hessian->rows;
    }
    if (gptq) {
      auto g = GptqQuantize(f.data(), n, k, h, format, config.gptq);
      if (!g.ok()) return Status(g.status().code(), "quantization of '" + w.name + "': " + g.status().message());
      e->m = std::move(*g);
      deq = Dequantize(e->m);
      t.output_sqnr_db = OutputSqnrDb(f.data(), deq.data(), n, k, h);
      t.method = "gptq";
    }
    if (awq && hessian != nullptr && awq->alpha.count(w.name)) {
      t.method = gptq ? "awq+gptq" : "awq";
      t.rtn_output_sqnr_db = awq->rtn_output_sqnr_db.at(w.name);
      const double alpha = awq->alpha.at(w.name);
      char what[64];
      if (std::isnan(alpha)) std::snprintf(what, sizeof what, "awq: rows scaled for the next layer");
      else std::snprintf(what, sizeof what, "awq alpha %.2f", alpha);
      note += std::string(note.empty() ? "" : "; ") + what;
    }
    const std::string what = w.name + " quantized " + SchemeName(format);
    e->q = Owned(e->m.q, what);
    e->scales = Owned(e->m.scales, what + " scales");
    if (!e->m.offsets.empty()) e->offsets = Owned(e->m.offsets, what + " offsets");
    t.name = w.name;
    t.use = use;
    t.scheme = SchemeName(spec);
    t.note = note;
    t.shape = w.shape;
    t.f32_bytes = uint64_t(n * k) * 4;
    t.quant_bytes = e->m.q.size() + 4 * (e->m.scales.size() + e->m.offsets.size());
    t.weight_sqnr_db = SqnrDb(f.data(), deq.data(), f.size());
    report.f32_bytes += t.f32_bytes;
    report.quant_bytes += t.quant_bytes;
    e->report_index = report.tensors.size();
    report.tensors.push_back(std::move(t));
    // Dequantization is identical for the dynamic form; the activation mode is an op attribute.
    Entry* raw = e.get();
    entries.emplace(key, std::move(e));
    return raw;
  };

  // Adds (or finds, for a second use in the same graph) the entry's constants; returns ids.
  auto add_constants = [&](Graph& g, const Value& w, const Entry& e) {
    const std::string base = w.name + "." + SchemeName(e.spec) + (e.gptq ? ".gptq" : "");
    auto constant = [&](const std::string& name, DType dt, Shape shape,
                        const std::shared_ptr<const graph::ConstantSource>& src) {
      const int32_t id = g.FindValue(name);
      return id >= 0 ? id : g.AddConstant(name, dt, std::move(shape), src);
    };
    const int64_t n = e.m.n, k = e.m.k;
    std::vector<int32_t> ids;
    if (e.m.bits == 8) {
      ids.push_back(constant(base + ".q", DType::kI8, {n, k}, e.q));
      ids.push_back(constant(base + ".scales", DType::kF32, {n}, e.scales));
    } else {
      ids.push_back(constant(base + ".q", DType::kU8, {n, k / 2}, e.q));
      ids.push_back(constant(base + ".scales", DType::kF32, {n, k / e.m.group}, e.scales));
      if (e.offsets) ids.push_back(constant(base + ".offsets", DType::kF32, {n, k / e.m.group}, e.offsets));
    }
    return ids;
  };

  for (Graph& g : graphs) {
    int64_t last_matmul = -1;
    for (size_t i = 0; i < g.ops.size(); ++i) if (g.ops[i].kind == OpKind::kMatMul) last_matmul = int64_t(i);
    for (size_t i = 0; i < g.ops.size(); ++i) {
      graph::Op& op = g.ops[i];
      const bool matmul = op.kind == OpKind::kMatMul;
      if (!matmul && op.kind != OpKind::kEmbedding) continue;
      if (op.inputs.size() < 2) continue;
      const Value w = g.values[size_t(op.inputs[1])];  // copy: AddConstant may reallocate
      if (w.kind != ValueKind::kConstant || w.dtype != DType::kF32 || w.shape.size() != 2 || !w.source) continue;
      const std::string use = !matmul ? "embedding" : int64_t(i) == last_matmul ? "lm_head" : "linear";
      SchemeSpec spec = choose(w.name, use);
      if (!matmul) spec.scheme = WeightOnly(spec.scheme);
      if (spec.scheme == Scheme::kNone) continue;
      std::string note;
      spec = resolve(w, spec, use, &note);
      SLM_ASSIGN_OR_RETURN(Entry * e, get_entry(w, spec, use, note));
      const std::vector<int32_t> ids = add_constants(g, w, *e);
      const int64_t bits = e->m.bits, group = e->m.group, has_off = e->offsets ? 1 : 0;
      std::vector<int32_t> in = {op.inputs[0]};
      in.insert(in.end(), ids.begin(), ids.end());
      if (matmul) {
        if (op.inputs.size() == 3) in.push_back(op.inputs[2]);  // bias
        op.kind = OpKind::kMatMulQ;
        op.ints = {bits, group, has_off, IsDynamic(spec.scheme) ? 1 : 0};
      } else {
        op.kind = OpKind::kEmbeddingQ;
        op.ints = {bits, group, has_off};
      }
      op.inputs = std::move(in);
    }
    RemoveUnusedConstants(g);
    Status s = g.Validate();
    if (!s.ok()) return Internal("quantization broke method '" + g.name + "': " + s.message());
  }
  // A pattern that chose nothing is a typo or a name from another model: silently keeping the
  // default scheme would ship an artifact other than the one asked for.
  for (size_t i = 0; i < config.overrides.size(); ++i) {
    if (!override_used[i]) {
      return InvalidArgument("quantization override '" + config.overrides[i].first + "=" +
                             SchemeName(config.overrides[i].second) +
                             "' matches no weight of the model (or an earlier override took every weight it "
                             "matches); patterns match checkpoint tensor names, e.g. "
                             "'model.layers.0.mlp.down_proj.weight', and '" + std::string(kLmHeadName) +
                             "' for the lm_head");
    }
  }
  return report;
}

}  // namespace slm::quant
