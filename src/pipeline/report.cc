// report.json and a self-contained report.html (no external assets: inline CSS and SVG).
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/atomic_file.h"
#include "pipeline/pipeline.h"

namespace slm::pipeline {
namespace {

std::string Esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

std::string Fmt(double v, int prec = 2) {
  if (std::isinf(v)) return v > 0 ? "∞" : "-∞";
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f", prec, v);
  return b;
}

// Horizontal bar chart of per-layer SQNR (dB); identical layers (∞) drawn full width, labelled ∞.
std::string SqnrSvg(const nlohmann::json& layers) {
  if (!layers.is_array() || layers.empty()) return "<p>No per-layer SQNR (evaluation did not run).</p>";
  double mx = 1;
  for (const auto& l : layers) {
    if (l["sqnr_db"].is_number()) mx = std::max(mx, l["sqnr_db"].get<double>());
  }
  const int row = 22, label_w = 90, bar_w = 420;
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << label_w + bar_w + 80 << "' height='" << row * layers.size() + 10
    << "' role='img' aria-label='SQNR per layer'>";
  int y = 5;
  for (const auto& l : layers) {
    const bool inf = !l["sqnr_db"].is_number();
    const double v = inf ? mx : l["sqnr_db"].get<double>();
    const int w = std::max(1, static_cast<int>(bar_w * std::max(0.0, v) / mx));
    s << "<text x='0' y='" << y + 15 << "' font-size='12'>" << Esc(l.value("layer", "")) << "</text>";
    s << "<rect x='" << label_w << "' y='" << y << "' width='" << w << "' height='" << row - 6 << "' fill='"
      << (inf ? "#7fb77e" : "#4a78c2") << "'/>";
    s << "<text x='" << label_w + w + 4 << "' y='" << y + 15 << "' font-size='12'>" << (inf ? "∞ (identical)" : Fmt(v, 1) + " dB")
      << "</text>";
    y += row;
  }
  s << "</svg>";
  return s.str();
}

}  // namespace

Status WriteReports(const PipelineContext& ctx, RunReport& rep) {
  nlohmann::json j;
  j["format"] = "staticlm-pipeline-report/1";
  j["name"] = ctx.name;
  j["tool_version"] = ToolVersion();
  j["total_ms"] = rep.total_ms;
  nlohmann::json stages = nlohmann::json::array();
  double work_ms = 0;
  for (const auto& s : rep.stages) {
    stages.push_back({{"stage", StageName(s.stage)}, {"status", s.status}, {"reason", s.reason}, {"ms", s.ms}, {"key", s.key}});
    work_ms += s.ms;
  }
  j["stages"] = stages;
  const PipelineState& st = rep.state;
  if (st.compiled) {
    struct stat sb {};
    uint64_t bytes = ::stat(st.compiled->artifact_path.c_str(), &sb) == 0 ? static_cast<uint64_t>(sb.st_size) : 0;
    j["artifact"] = {{"path", st.compiled->artifact_path}, {"bytes", bytes}, {"reference", st.compiled->reference_path},
                     {"debug_record", st.compiled->debug_record_path}, {"pass_log", st.compiled->pass_log}};
    // The quantizer's report: per tensor scheme, method (rtn / gptq), weight and output SQNR.
    if (!st.compiled->quantization.is_null()) j["quantization"] = st.compiled->quantization;
  }
  if (st.inference) {
    nlohmann::json gens = nlohmann::json::array();
    for (const auto& o : st.inference->outputs) {
      gens.push_back({{"prompt", o.prompt}, {"text", o.text}, {"generated_ids", o.generated_ids},
                      {"stop_reason", o.stop_reason}, {"stats", o.stats.ToJson()}});
    }
    j["inference"] = {{"device", st.inference->device}, {"generations", gens},
                      {"trace", st.inference->trace_json.empty() ? "" : ctx.artifact_dir + "/trace.json"}};
  }
  if (st.evaluation) j["evaluation"] = st.evaluation->ToJson();
  rep.report = j;
  rep.report_json_path = ctx.artifact_dir + "/report.json";
  SLM_RETURN_IF_ERROR(WriteFileAtomically(rep.report_json_path, j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace)));

  std::ostringstream h;
  h << "<!doctype html><html><head><meta charset='utf-8'><title>staticlm pipeline: " << Esc(ctx.name)
    << "</title><style>body{font-family:sans-serif;max-width:900px;margin:2em auto}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}pre{white-space:pre-wrap;background:#f6f6f6;padding:8px}"
       "</style></head><body>";
  h << "<h1>Pipeline report: " << Esc(ctx.name) << "</h1><p>" << Esc(ToolVersion()) << ", total " << Fmt(rep.total_ms, 1)
    << " ms</p>";
  h << "<h2>Stages</h2><table><tr><th>stage</th><th>status</th><th>ms</th><th>reason</th></tr>";
  for (const auto& s : rep.stages) {
    h << "<tr><td>" << StageName(s.stage) << "</td><td>" << Esc(s.status) << "</td><td>" << Fmt(s.ms, 1) << "</td><td>"
      << Esc(s.reason) << "</td></tr>";
  }
  h << "</table>";
  if (j.contains("artifact")) {
    h << "<h2>Artifact</h2><p>" << Esc(j["artifact"]["path"].get<std::string>()) << ": "
      << Fmt(j["artifact"]["bytes"].get<double>() / 1048576.0, 3) << " MiB</p>";
  }
  if (j.contains("quantization") && j["quantization"].contains("tensors")) {
    // Output SQNR on the calibration activations: round-to-nearest → the stored values.
    h << "<h2>Quantization</h2><table><tr><th>tensor</th><th>scheme</th><th>method</th><th>weight SQNR dB</th>"
         "<th>output SQNR dB (rtn → stored)</th></tr>";
    auto db = [](const nlohmann::json& t, const char* key) {
      return t.contains(key) && t[key].is_number() ? Fmt(t[key].get<double>(), 2) : std::string(t.contains(key) ? "∞" : "–");
    };
    for (const auto& t : j["quantization"]["tensors"]) {
      h << "<tr><td>" << Esc(t.value("name", "")) << "</td><td>" << Esc(t.value("scheme", "")) << "</td><td>"
        << Esc(t.value("method", "")) << "</td><td>" << db(t, "weight_sqnr_db") << "</td><td>"
        << (t.contains("output_sqnr_db") ? db(t, "rtn_output_sqnr_db") + " → " + db(t, "output_sqnr_db") : "–")
        << "</td></tr>";
    }
    h << "</table>";
  }
  if (st.inference) {
    h << "<h2>Generation and speed</h2>";
    for (const auto& o : st.inference->outputs) {
      h << "<pre>" << Esc(o.prompt) << Esc(o.text) << "</pre><p>" << Esc(o.stats.ToText()) << "</p>";
    }
  }
  if (st.evaluation) {
    const auto e = st.evaluation->ToJson();
    h << "<h2>Quality</h2><ul>";
    if (st.evaluation->has_perplexity) {
      h << "<li>perplexity " << Fmt(st.evaluation->perplexity.perplexity, 3) << " over "
        << st.evaluation->perplexity.tokens_scored << " tokens (" << st.evaluation->perplexity.windows << " windows)</li>";
    }
    if (st.evaluation->has_comparison) {
      h << "<li>logits SQNR " << Fmt(st.evaluation->comparison.logits_sqnr_db, 1) << " dB, top-1 agreement "
        << Fmt(100 * st.evaluation->comparison.top1_agreement, 1) << "% over " << st.evaluation->comparison.tokens
        << " tokens</li>";
    }
    h << "</ul><h3>SQNR per layer</h3>"
      << SqnrSvg(e.contains("comparison") ? e["comparison"]["layers"] : nlohmann::json());
  }
  h << "</body></html>\n";
  rep.report_html_path = ctx.artifact_dir + "/report.html";
  return WriteFileAtomically(rep.report_html_path, h.str());
}

}  // namespace slm::pipeline
