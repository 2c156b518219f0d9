#include "pipeline/pipeline.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/atomic_file.h"
#include "core/mapped_file.h"
#include "io/artifact_writer.h"

namespace slm::pipeline {
namespace fs = std::filesystem;

namespace {
constexpr const char* kStageNames[kNumStages] = {"model_preparation", "quantization", "compilation", "inference",
                                                 "evaluation"};
constexpr const char* kStagePrefix = "stage '";

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

const char* StageName(StageId s) { return kStageNames[static_cast<int>(s)]; }

Result<StageId> ParseStage(const std::string& name) {
  for (int i = 0; i < kNumStages; ++i) {
    if (name == kStageNames[i]) return static_cast<StageId>(i);
  }
  return InvalidArgument("unknown stage '" + name +
                         "' (stages: model_preparation, quantization, compilation, inference, evaluation)");
}

std::string ToolVersion() { return std::string(io::kArtifactProducer) + " pipeline/1"; }

bool IsStageErrorStatus(const Status& s) { return !s.ok() && s.message().rfind(kStagePrefix, 0) == 0; }

Status StageError::ToStatus() const {
  if (IsStageErrorStatus(cause)) return cause;
  return Status(cause.code(), std::string(kStagePrefix) + StageName(stage) + "' failed: " + cause.message());
}

Status WrapStageError(StageId stage, const Status& cause) { return StageError{stage, cause}.ToStatus(); }

// ---- strategies -----------------------------------------------------------------------------
StrategyRegistry& StrategyRegistry::Global() {
  static StrategyRegistry* r = new StrategyRegistry();
  return *r;
}
void StrategyRegistry::Register(StageId stage, const std::string& engine, StrategyFactory f) {
  table_[{static_cast<int>(stage), engine}] = std::move(f);
}
const StrategyFactory* StrategyRegistry::Find(StageId stage, const std::string& engine) const {
  auto it = table_.find({static_cast<int>(stage), engine});
  return it == table_.end() ? nullptr : &it->second;
}
std::string StrategyRegistry::Engines(StageId stage) const {
  std::string s;
  for (const auto& [k, f] : table_) {
    if (k.first == static_cast<int>(stage)) s += (s.empty() ? "" : ", ") + k.second;
  }
  return s;
}

namespace {

std::string ArtifactPath(const PipelineContext& c) { return c.artifact_dir + "/model.slm"; }

class PrepareStrategy final : public Strategy {
 public:
  Status Run(StageRun& r) override {
    SLM_ASSIGN_OR_RETURN(PreparedModel m, r.adapters.model_loader->Load(r.context.preparation.model_path));
    nlohmann::json files = nlohmann::json::object();
    for (const auto& [f, h] : m.file_hashes) files[f] = HexU64(h);
    nlohmann::json j = {{"checkpoint", m.checkpoint_dir}, {"architecture", m.spec.architecture},
                        {"model_type", m.spec.model_type}, {"num_layers", m.spec.num_layers},
                        {"hidden_size", m.spec.hidden_size}, {"vocab_size", m.spec.vocab_size},
                        {"files_xxh3", files}};
    // This stage runs on every pipeline run (its file hashes decide what is reused), so it
    // rewrites its record only when the record changes: a reused run leaves the directory as is.
    const std::string out = r.context.artifact_dir + "/prepared.json";
    const std::string text = j.dump(1);
    std::string existing;
    {
      std::ifstream in(out, std::ios::binary);
      if (in) existing.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (existing != text) SLM_RETURN_IF_ERROR(WriteFileAtomically(out, text));
    r.outputs.push_back(out);
    r.state.prepared = std::move(m);
    return Status::Ok();
  }
};

nlohmann::json CalibrationToJson(const QuantizationOutput& q) {
  return {{"scheme", q.scheme}, {"calibration", {{"source", q.calibration.source}, {"samples", q.calibration.samples}}}};
}

class QuantizeStrategy final : public Strategy {
 public:
  Status Run(StageRun& r) override {
    QuantizationOutput q;
    q.scheme = r.adapters.quantizer->scheme();
    if (r.adapters.calibration) {
      if (r.progress) r.progress("loading calibration samples (" + r.adapters.calibration->name() + ")");
      SLM_ASSIGN_OR_RETURN(q.calibration, r.adapters.calibration->Load(*r.state.prepared));
    }
    // The weights are rewritten by the Quantizer when compilation builds the graphs (the graphs'
    // shapes are compilation options); this stage fixes the scheme and the calibration set.
    const std::string out = r.context.artifact_dir + "/quantization.json";
    SLM_RETURN_IF_ERROR(WriteFileAtomically(out, CalibrationToJson(q).dump()));
    r.outputs.push_back(out);
    r.state.quantized = std::move(q);
    return Status::Ok();
  }
};

class CompileStrategy final : public Strategy {
 public:
  Status Run(StageRun& r) override {
    CompileRequest req;
    req.model = &*r.state.prepared;
    const bool quantize = r.state.quantized.has_value() && r.state.quantized->scheme != "none";
    if (r.state.quantized) {
      req.quantizer = r.adapters.quantizer.get();
      req.calibration = &r.state.quantized->calibration;
    }
    req.passes = r.adapters.passes;
    req.artifact_path = ArtifactPath(r.context);
    req.reference_path = quantize ? r.context.artifact_dir + "/reference.slm" : "";
    req.debug_record_path = r.context.artifact_dir + "/debug.json";
    req.progress = r.progress;
    if (!quantize) {
      std::error_code ec;
      fs::remove(r.context.artifact_dir + "/reference.slm", ec);
    }
    SLM_ASSIGN_OR_RETURN(CompileResult res, r.adapters.compiler->Compile(req));
    const std::string out = r.context.artifact_dir + "/compilation.json";
    nlohmann::json j = {{"artifact", res.artifact_path}, {"reference", res.reference_path},
                        {"debug_record", res.debug_record_path}, {"artifact_bytes", res.artifact_bytes},
                        {"max_context_len", res.max_context_len}, {"methods", res.methods}, {"pass_log", res.pass_log},
                        {"quantization", res.quantization}};  // per-tensor scheme, method, SQNR (null: none)
    SLM_RETURN_IF_ERROR(WriteFileAtomically(out, j.dump(1)));
    r.outputs = {res.artifact_path, res.debug_record_path, out};
    if (!res.reference_path.empty()) r.outputs.push_back(res.reference_path);
    r.state.compiled = std::move(res);
    return Status::Ok();
  }
};

class InferStrategy final : public Strategy {
 public:
  Status Run(StageRun& r) override {
    DeviceRequest req = r.context.inference.request;
    req.artifact_path = r.state.compiled->artifact_path;
    if (r.progress) r.progress("push → execute → pull on '" + r.adapters.device_runner->name() + "'");
    SLM_ASSIGN_OR_RETURN(DeviceResult res, r.adapters.device_runner->Run(req));
    const std::string out = r.context.artifact_dir + "/inference.json";
    SLM_RETURN_IF_ERROR(WriteFileAtomically(out, res.ToJson().dump(1, ' ', false, nlohmann::json::error_handler_t::replace)));
    r.outputs.push_back(out);
    const std::string trace = r.context.artifact_dir + "/trace.json";
    std::error_code ec;
    fs::remove(trace, ec);
    if (!res.trace_json.empty()) {
      SLM_RETURN_IF_ERROR(WriteFileAtomically(trace, res.trace_json));
      r.outputs.push_back(trace);
    }
    r.state.inference = std::move(res);
    return Status::Ok();
  }
};

class EvalStrategy final : public Strategy {
 public:
  Status Run(StageRun& r) override {
    EvalRequest req;
    req.artifact_path = r.state.compiled->artifact_path;
    req.reference_path = r.state.compiled->reference_path;
    req.text_path = r.context.evaluation.text_path;
    req.inference = r.state.inference ? &*r.state.inference : nullptr;
    if (r.progress) r.progress("perplexity + logits comparison");
    SLM_ASSIGN_OR_RETURN(EvalResult res, r.adapters.evaluator->Evaluate(req));
    const std::string out = r.context.artifact_dir + "/evaluation.json";
    SLM_RETURN_IF_ERROR(WriteFileAtomically(out, res.ToJson().dump(1)));
    r.outputs.push_back(out);
    r.state.evaluation = std::move(res);
    return Status::Ok();
  }
};

[[maybe_unused]] const bool kRegistered = [] {
  auto& g = StrategyRegistry::Global();
  g.Register(StageId::kModelPreparation, "default", [] { return std::make_unique<PrepareStrategy>(); });
  g.Register(StageId::kQuantization, "default", [] { return std::make_unique<QuantizeStrategy>(); });
  g.Register(StageId::kCompilation, "default", [] { return std::make_unique<CompileStrategy>(); });
  g.Register(StageId::kInference, "default", [] { return std::make_unique<InferStrategy>(); });
  g.Register(StageId::kEvaluation, "default", [] { return std::make_unique<EvalStrategy>(); });
  return true;
}();

// Selects an adapter: `key` is either a name or a map {name, options}. An injected instance
// wins (its config options are then not read).
template <typename T>
std::shared_ptr<T> SelectAdapter(Options& section, const std::string& key, const std::string& def,
                                 const FactoryTable<T>& table, std::shared_ptr<T> injected, bool required = true) {
  if (injected) {
    section.Raw(key);
    return injected;
  }
  if (!section.Has(key) && def.empty()) {
    if (required) section.Error(key, "missing (required): name an adapter (" + table.Names() + ")");
    section.Raw(key);
    return nullptr;
  }
  std::string name = def;
  nlohmann::json raw = section.Raw(key);
  nlohmann::json opts = nlohmann::json::object();
  std::string opts_path = section.KeyPath(key) + ".options";
  if (raw.is_string()) {
    name = raw.get<std::string>();
  } else if (raw.is_object()) {
    Options a(&raw, section.KeyPath(key), section.diag(), section.base_dir());
    name = a.String("name", def);
    if (name.empty()) a.Error("name", "missing (required): one of " + table.Names());
    opts = a.Raw("options");
    if (!opts.is_null() && !opts.is_object()) {
      a.Error("options", "expected a map of options, found " + DescribeJson(opts));
      opts = nlohmann::json::object();
    }
    a.RejectUnknown();
  } else if (!raw.is_null()) {
    section.Error(key, "expected an adapter name or a map {name, options}, found " + DescribeJson(raw));
    return nullptr;
  }
  const AdapterFactory<T>* f = table.Find(name);
  if (f == nullptr) {
    section.diag()->Add(raw.is_object() ? section.KeyPath(key) + ".name" : section.KeyPath(key),
                        "unknown adapter '" + name + "' (known: " + table.Names() + ")");
    return nullptr;
  }
  Options o(&opts, opts_path, section.diag(), section.base_dir());
  std::unique_ptr<T> made = (*f)(o);
  return std::shared_ptr<T>(std::move(made));
}

}  // namespace

Result<std::unique_ptr<Pipeline>> Pipeline::FromYamlFile(const std::string& path, AdapterOverrides overrides) {
  SLM_ASSIGN_OR_RETURN(ConfigDoc doc, LoadYamlConfig(path));
  return FromConfig(doc, std::move(overrides));
}

Result<std::unique_ptr<Pipeline>> Pipeline::FromConfig(const ConfigDoc& doc, AdapterOverrides ov) {
  static const AdapterRegistry kBuiltin = AdapterRegistry::Builtin();
  const AdapterRegistry& reg = ov.registry != nullptr ? *ov.registry : kBuiltin;
  Diagnostics diag(&doc);
  Options root(&doc.root, "", &diag, doc.base_dir);
  auto p = std::unique_ptr<Pipeline>(new Pipeline());
  PipelineContext& c = p->ctx_;
  Adapters& a = p->adapters_;

  c.name = root.String("name", "pipeline");
  // model: a path, or {path, loader}
  nlohmann::json model_raw = root.Raw("model");
  nlohmann::json loader_spec = "hf";
  if (model_raw.is_string()) {
    Options tmp(&doc.root, "", &diag, doc.base_dir);
    c.model_path = tmp.Path("model");
  } else if (model_raw.is_object()) {
    Options m = Options(&doc.root["model"], "model", &diag, doc.base_dir);
    c.model_path = m.Path("path");
    if (m.Has("loader")) loader_spec = m.Raw("loader");
    m.Raw("loader");
    m.RejectUnknown();
  } else if (!model_raw.is_null()) {
    root.Error("model", "expected a checkpoint path or a map {path, loader}, found " + DescribeJson(model_raw));
  }
  const std::string model_key = model_raw.is_object() ? "model.path" : "model";
  if (c.model_path.empty()) diag.Add(model_key, "missing (required): the Hugging Face checkpoint directory");
  else if (!fs::is_directory(c.model_path)) diag.Add(model_key, "no such checkpoint directory: " + c.model_path);
  else if (!fs::is_regular_file(c.model_path + "/config.json")) diag.Add(model_key, c.model_path + " has no config.json");
  c.preparation.model_path = c.model_path;

  c.backend = root.String("backend", "cpu");
  c.artifact_dir = root.Path("artifact_dir");
  if (c.artifact_dir.empty()) root.Error("artifact_dir", "missing (required): where the artifact, manifest and reports go");
  c.prompts = root.StringList("prompts");

  Options stages = root.Child("stages");
  std::array<Options, kNumStages> sec = {stages.Child("model_preparation"), stages.Child("quantization"),
                                         stages.Child("compilation"), stages.Child("inference"),
                                         stages.Child("evaluation")};
  for (int i = 0; i < kNumStages; ++i) {
    c.sections[i] = stages.Has(kStageNames[i]) ? doc.root["stages"][kStageNames[i]] : nlohmann::json::object();
    c.enabled[i] = sec[i].Bool("enabled", true);
    c.engine[i] = sec[i].String("engine", "default");
    if (StrategyRegistry::Global().Find(static_cast<StageId>(i), c.engine[i]) == nullptr) {
      sec[i].Error("engine", "unknown engine '" + c.engine[i] + "' for " + kStageNames[i] + " (known: " +
                                 StrategyRegistry::Global().Engines(static_cast<StageId>(i)) + ")");
    }
  }
  stages.RejectUnknown();

  // model_preparation
  {
    Options& s = sec[0];
    nlohmann::json holder = {{"loader", loader_spec}};
    Options l(&holder, "model", &diag, doc.base_dir);
    if (s.Has("loader")) a.model_loader = SelectAdapter(s, "loader", "hf", reg.model_loaders, ov.model_loader);
    else a.model_loader = SelectAdapter(l, "loader", "hf", reg.model_loaders, ov.model_loader);
    s.RejectUnknown();
  }
  // quantization
  {
    Options& s = sec[1];
    a.quantizer = SelectAdapter(s, "quantizer", "none", reg.quantizers, ov.quantizer);
    a.calibration = SelectAdapter(s, "calibration", "", reg.calibration, ov.calibration, /*required=*/false);
    if (a.quantizer && a.quantizer->NeedsCalibration() && !a.calibration) {
      s.Error("calibration", "missing: quantizer '" + a.quantizer->scheme() +
                                 "' uses calibration activations (method " +
                                 a.quantizer->Fingerprint().value("method", std::string("?")) +
                                 "); name a calibration adapter (text_file, jsonl, random)");
    }
    s.RejectUnknown();
  }
  // compilation
  {
    Options& s = sec[2];
    a.compiler = SelectAdapter(s, "compiler", c.backend, reg.compilers, ov.compiler);
    if (a.compiler && a.compiler->backend() != c.backend) {
      s.Error("compiler", "compiler backend '" + a.compiler->backend() + "' does not match backend '" + c.backend + "'");
    }
    c.compilation.pass_names = s.StringList("passes");
    for (size_t i = 0; i < c.compilation.pass_names.size(); ++i) {
      auto it = reg.passes.find(c.compilation.pass_names[i]);
      if (it == reg.passes.end()) {
        std::string known;
        for (const auto& [n, f] : reg.passes) known += (known.empty() ? "" : ", ") + n;
        s.Error("passes[" + std::to_string(i) + "]", "unknown graph pass '" + c.compilation.pass_names[i] + "' (known: " + known + ")");
      } else {
        a.passes.push_back(it->second);
      }
    }
    for (const GraphPass& gp : ov.passes) a.passes.push_back(gp);
    s.RejectUnknown();
  }
  // inference
  {
    Options& s = sec[3];
    a.device_runner = SelectAdapter(s, "runner", "local", reg.device_runners, ov.device_runner);
    DeviceRequest& r = c.inference.request;
    r.prompts = c.prompts;
    r.max_new_tokens = s.Int("max_new_tokens", 64, 1);
    r.temperature = s.Double("temperature", 0.0);
    r.top_k = s.Int("top_k", 0, 0);
    r.top_p = s.Double("top_p", 1.0);
    r.min_p = s.Double("min_p", 0.0);
    r.repetition_penalty = s.Double("repetition_penalty", 1.0);
    r.seed = static_cast<uint64_t>(s.Int("seed", 0, 0));
    r.stop_on_eos = s.Bool("stop_on_eos", true);
    r.trace = s.Bool("trace", false);
    if (c.enabled[3] && c.prompts.empty()) root.Error("prompts", "missing (required by inference): at least one prompt");
    s.RejectUnknown();
  }
  // evaluation
  {
    Options& s = sec[4];
    a.evaluator = SelectAdapter(s, "evaluator", "default", reg.evaluators, ov.evaluator);
    c.evaluation.text_path = s.Path("text", "");
    if (!c.evaluation.text_path.empty() && !fs::is_regular_file(c.evaluation.text_path)) {
      s.Error("text", "no such file: " + c.evaluation.text_path);
    }
    s.RejectUnknown();
  }
  for (Options& s : sec) (void)s;
  if (!c.enabled[2] && (c.enabled[3] || c.enabled[4]) && !c.artifact_dir.empty() &&
      !fs::is_regular_file(ArtifactPath(c))) {
    diag.Add("stages.compilation.enabled", "compilation is off but there is no artifact at " + ArtifactPath(c) +
                                               " for inference/evaluation to use");
  }
  root.RejectUnknown();
  SLM_RETURN_IF_ERROR(diag.ToStatus("invalid pipeline config " + (doc.source.empty() ? std::string("(C++)") : doc.source)));
  return p;
}

// ---- manifest -------------------------------------------------------------------------------
namespace {

struct Manifest {
  nlohmann::json j = {{"format", "staticlm-pipeline-manifest/1"}, {"stages", nlohmann::json::object()}};
  std::string path;

  static Manifest Load(const std::string& path) {
    Manifest m;
    m.path = path;
    auto text = ReadFileToString(path);
    if (text.ok()) {
      nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
      if (!j.is_discarded() && j.is_object() && j.contains("stages") && j["stages"].is_object()) m.j = j;
    }
    return m;
  }
  // A stage is finished under `key` when recorded with that key and every output still hashes
  // to what was recorded.
  bool Finished(StageId s, const std::string& key) const {
    const auto& st = j["stages"];
    if (!st.contains(StageName(s))) return false;
    const auto& e = st[StageName(s)];
    if (e.value("key", "") != key) return false;
    for (const auto& [file, hash] : e["outputs"].items()) {
      auto h = HashFile(file);
      if (!h.ok() || HexU64(*h) != hash.get<std::string>()) return false;
    }
    return true;
  }
  Status Record(StageId s, const std::string& key, const nlohmann::json& inputs, const std::vector<std::string>& outs,
                double ms) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& f : outs) {
      SLM_ASSIGN_OR_RETURN(uint64_t h, HashFile(f));
      o[f] = HexU64(h);
    }
    j["tool_version"] = ToolVersion();
    j["stages"][StageName(s)] = {{"key", key}, {"inputs", inputs}, {"outputs", o}, {"ms", ms}};
    return Save();
  }
  void Forget(StageId s) { j["stages"].erase(StageName(s)); }
  Status Save() const { return WriteFileAtomically(path, j.dump(1)); }
};

// Loads a finished stage's typed output from its files.
Status LoadStageOutput(StageId s, const PipelineContext& c, Adapters& a, PipelineState& st) {
  auto read_json = [](const std::string& p) -> Result<nlohmann::json> {
    SLM_ASSIGN_OR_RETURN(std::string t, ReadFileToString(p));
    nlohmann::json j = nlohmann::json::parse(t, nullptr, false);
    if (j.is_discarded()) return ParseError(p + ": not valid JSON");
    return j;
  };
  switch (s) {
    case StageId::kModelPreparation:
      return Status::Ok();  // materialized while computing its key
    case StageId::kQuantization: {
      SLM_ASSIGN_OR_RETURN(nlohmann::json j, read_json(c.artifact_dir + "/quantization.json"));
      QuantizationOutput q;
      q.scheme = j.value("scheme", "none");
      q.calibration.source = j["calibration"].value("source", "");
      q.calibration.samples = j["calibration"]["samples"].get<std::vector<std::vector<int32_t>>>();
      st.quantized = std::move(q);
      return Status::Ok();
    }
    case StageId::kCompilation: {
      SLM_ASSIGN_OR_RETURN(nlohmann::json j, read_json(c.artifact_dir + "/compilation.json"));
      CompileResult r;
      r.artifact_path = j["artifact"];
      r.reference_path = j["reference"];
      r.debug_record_path = j["debug_record"];
      r.artifact_bytes = j["artifact_bytes"];
      r.max_context_len = j["max_context_len"];
      r.methods = j["methods"].get<std::vector<std::string>>();
      r.pass_log = j["pass_log"].get<std::vector<std::string>>();
      r.quantization = j.value("quantization", nlohmann::json(nullptr));
      st.compiled = std::move(r);
      return Status::Ok();
    }
    case StageId::kInference: {
      SLM_ASSIGN_OR_RETURN(nlohmann::json j, read_json(c.artifact_dir + "/inference.json"));
      SLM_ASSIGN_OR_RETURN(DeviceResult r, DeviceResult::FromJson(j));
      r.device = j.value("device", "");
      if (j.value("has_trace", false)) {
        SLM_ASSIGN_OR_RETURN(r.trace_json, ReadFileToString(c.artifact_dir + "/trace.json"));
      }
      st.inference = std::move(r);
      return Status::Ok();
    }
    case StageId::kEvaluation: {
      SLM_ASSIGN_OR_RETURN(nlohmann::json j, read_json(c.artifact_dir + "/evaluation.json"));
      st.evaluation = EvalResult::FromJson(j);
      return Status::Ok();
    }
  }
  return Internal("unknown stage");
}

// Removes temp files a killed run left behind (AtomicFileWriter names them "<final>.tmp.<pid>").
void RemoveStaleTempFiles(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.find(".tmp.") != std::string::npos) fs::remove(e.path(), ec);
  }
}

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(enabled && ::isatty(2) == 1) {}
  std::function<void(const std::string&)> For(StageId s) {
    if (!enabled_) return nullptr;
    return [this, s](const std::string& msg) {
      if (tty_) {
        std::fprintf(stderr, "\r\033[K[%s] %s", StageName(s), msg.c_str());
        dirty_ = true;
      } else {
        std::fprintf(stderr, "[%s] %s\n", StageName(s), msg.c_str());
      }
    };
  }
  void Line(const std::string& msg) {
    if (!enabled_) return;
    if (tty_ && dirty_) std::fprintf(stderr, "\r\033[K");
    dirty_ = false;
    std::fprintf(stderr, "%s\n", msg.c_str());
  }

 private:
  bool enabled_, tty_;
  bool dirty_ = false;
};

}  // namespace

Result<RunReport> Pipeline::Run(const RunOptions& opt) {
  last_error_.reset();
  const PipelineContext& c = ctx_;
  const double t0 = NowMs();
  std::error_code ec;
  fs::create_directories(c.artifact_dir, ec);
  if (ec) return IoError("cannot create artifact dir " + c.artifact_dir + ": " + ec.message());
  RemoveStaleTempFiles(c.artifact_dir);
  Manifest manifest = Manifest::Load(c.artifact_dir + "/manifest.json");
  if (manifest.j.value("tool_version", ToolVersion()) != ToolVersion()) manifest.j["stages"] = nlohmann::json::object();
  Progress progress(opt.progress);

  RunReport report;
  PipelineState& st = report.state;
  std::string upstream_key;  // key of the last enabled upstream stage
  bool upstream_ran = false;
  for (int i = 0; i < kNumStages; ++i) {
    const StageId s = static_cast<StageId>(i);
    StageReport sr{s, "", "", 0, ""};
    auto fail = [&](const Status& cause) -> Status {
      last_error_ = StageError{s, cause};
      return last_error_->ToStatus();
    };
    if (!c.enabled[i]) {
      sr.status = "skipped";
      report.stages.push_back(sr);
      if (s == StageId::kCompilation) {
        // Skipped compilation: later stages use the artifact already in the artifact dir.
        CompileResult r;
        r.artifact_path = ArtifactPath(c);
        if (fs::is_regular_file(c.artifact_dir + "/reference.slm")) r.reference_path = c.artifact_dir + "/reference.slm";
        st.compiled = r;
        auto h = HashFile(r.artifact_path);
        upstream_key = h.ok() ? HexU64(*h) : "no-artifact";
      }
      continue;
    }
    // The stage's input key.
    nlohmann::json inputs = {{"tool_version", ToolVersion()}, {"engine", c.engine[i]}, {"config", c.sections[i]},
                             {"upstream", upstream_key}};
    switch (s) {
      case StageId::kModelPreparation: {
        // Preparation materializes the model to hash it (cheap: config + file hashes).
        const double ts = NowMs();
        auto strategy = (*StrategyRegistry::Global().Find(s, c.engine[i]))();
        StageRun run{c, adapters_, st, {}, progress.For(s)};
        Status status = strategy->Run(run);
        if (!status.ok()) return fail(status);
        nlohmann::json files = nlohmann::json::object();
        for (const auto& [f, h] : st.prepared->file_hashes) files[f] = HexU64(h);
        inputs["checkpoint_files_xxh3"] = files;
        inputs["loader"] = adapters_.model_loader->name();
        sr.key = HexU64(HashString(inputs.dump()));
        sr.ms = NowMs() - ts;
        const bool finished = manifest.Finished(s, sr.key);
        sr.status = finished && !opt.force ? "reused" : "ran";
        sr.reason = finished ? "" : "checkpoint or config changed (or first run)";
        if (!finished || opt.force) {
          Status rs = manifest.Record(s, sr.key, inputs, run.outputs, sr.ms);
          if (!rs.ok()) return fail(rs);
        }
        upstream_key = sr.key;
        upstream_ran = !finished || opt.force;
        report.stages.push_back(sr);
        progress.Line("[" + std::string(StageName(s)) + "] " + sr.status + " (" + std::to_string(static_cast<int>(sr.ms)) + " ms)");
        continue;
      }
      case StageId::kQuantization:
        inputs["quantizer"] = adapters_.quantizer->Fingerprint();
        inputs["calibration"] = adapters_.calibration ? adapters_.calibration->Fingerprint() : nlohmann::json(nullptr);
        break;
      case StageId::kCompilation: {
        inputs["compiler"] = adapters_.compiler->Fingerprint();
        std::vector<std::string> names;
        for (const auto& gp : adapters_.passes) names.push_back(gp.name);
        inputs["passes"] = names;
        inputs["quantization_enabled"] = c.enabled[1];
        break;
      }
      case StageId::kInference:
        inputs["runner"] = adapters_.device_runner->Fingerprint();
        inputs["request"] = c.inference.request.ToJson();
        break;
      case StageId::kEvaluation: {
        inputs["evaluator"] = adapters_.evaluator->Fingerprint();
        auto h = c.evaluation.text_path.empty() ? Result<uint64_t>(uint64_t{0}) : HashFile(c.evaluation.text_path);
        inputs["text_xxh3"] = h.ok() ? HexU64(*h) : "missing";
        break;
      }
    }
    sr.key = HexU64(HashString(inputs.dump()));
    const bool finished = manifest.Finished(s, sr.key);
    const bool selected = !opt.only || *opt.only == s;
    const bool after_only = opt.only && i > static_cast<int>(*opt.only);
    bool must_run = opt.force || (opt.from && i >= static_cast<int>(*opt.from)) || !finished;
    if (opt.only) must_run = selected;  // --only STAGE runs that stage, and only it
    if (after_only) {
      sr.status = "not selected";
      report.stages.push_back(sr);
      continue;
    }
    if (!must_run) {
      if (!finished) return fail(FailedPrecondition("not finished for the current inputs; run it first (without --only)"));
      Status ls = LoadStageOutput(s, c, adapters_, st);
      if (!ls.ok()) return fail(ls);
      sr.status = "reused";
    } else {
      sr.reason = opt.force ? "--force" : (opt.from && i >= static_cast<int>(*opt.from)) ? "--from" : opt.only ? "--only" : upstream_ran ? "upstream changed" : "inputs changed (or first run)";
      if (s == StageId::kInference || s == StageId::kEvaluation) {
        if (!st.compiled) return fail(FailedPrecondition("no compiled artifact to use"));
      }
      progress.Line("[" + std::string(StageName(s)) + "] running (" + sr.reason + ")");
      manifest.Forget(s);
      Status fs_ = manifest.Save();
      if (!fs_.ok()) return fail(fs_);
      const double ts = NowMs();
      auto strategy = (*StrategyRegistry::Global().Find(s, c.engine[i]))();
      StageRun run{c, adapters_, st, {}, progress.For(s)};
      Status status = strategy->Run(run);
      if (!status.ok()) return fail(status);
      sr.ms = NowMs() - ts;
      Status rs = manifest.Record(s, sr.key, inputs, run.outputs, sr.ms);
      if (!rs.ok()) return fail(rs);
      sr.status = "ran";
      upstream_ran = true;
    }
    progress.Line("[" + std::string(StageName(s)) + "] " + sr.status + (sr.status == "ran" ? " in " + std::to_string(static_cast<int>(sr.ms)) + " ms" : ""));
    upstream_key = sr.key;
    report.stages.push_back(sr);
  }
  report.total_ms = NowMs() - t0;
  report.manifest_path = manifest.path;
  Status ws = WriteReports(c, report);
  if (!ws.ok()) return ws;
  return report;
}

}  // namespace slm::pipeline
