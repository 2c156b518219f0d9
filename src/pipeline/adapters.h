// The injectable adapters the pipeline's strategies work through, their typed data, and the
// registry of factories that the config (YAML, CLI, C++) selects them from by name.
//
// Every adapter is constructed from `Options` (its config section): a factory reads its options
// with the typed getters, which record wrong types and unknown keys in the shared Diagnostics,
// so a whole config is checked before any stage runs.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "graph/graph.h"
#include "io/contract_metadata.h"
#include "llm/evaluation.h"
#include "llm/stats.h"
#include "model/compiler.h"
#include "model/model_spec.h"
#include "pipeline/config.h"

namespace slm::pipeline {

// ---- model_preparation ----------------------------------------------------------------------
struct PreparedModel {
  std::string checkpoint_dir;
  model::ModelSpec spec;
  std::map<std::string, uint64_t> file_hashes;  // file name in the checkpoint dir → XXH3-64
  std::string tokenizer_path;                   // "" when the checkpoint has none
};
class ModelLoader {
 public:
  virtual ~ModelLoader() = default;
  virtual std::string name() const = 0;
  virtual Result<PreparedModel> Load(const std::string& path) = 0;
};

// ---- quantization ---------------------------------------------------------------------------
struct CalibrationSet {
  std::vector<std::vector<int32_t>> samples;  // token ids, each at most the requested length
  std::string source;                         // what they came from
};
class CalibrationData {
 public:
  virtual ~CalibrationData() = default;
  virtual std::string name() const = 0;
  // Inputs that decide the samples (file hash, seed, counts): part of the manifest key.
  virtual nlohmann::json Fingerprint() const = 0;
  virtual Result<CalibrationSet> Load(const PreparedModel& model) = 0;
};
class Quantizer {
 public:
  virtual ~Quantizer() = default;
  virtual std::string scheme() const = 0;  // "none", "int8", ...
  virtual nlohmann::json Fingerprint() const = 0;
  // True when Apply needs calibration samples (e.g. GPTQ): the config is then rejected before
  // any stage runs if it names no calibration adapter.
  virtual bool NeedsCalibration() const { return false; }
  // Rewrites the prepared graphs' weights and records the scheme in their metadata, in place.
  // `report` (optional) receives what was done (per-tensor scheme, sizes, weight SQNR).
  virtual Status Apply(model::PreparedCompile& prepared, const CalibrationSet& calibration,
                       nlohmann::json* report) = 0;
};

// ---- compilation ----------------------------------------------------------------------------
// A caller-supplied graph pass. Runs on every method graph after quantization and before the
// backend's own transforms (memory planning, constant lifting, serialization).
struct GraphPass {
  std::string name;
  std::function<Status(graph::Graph&)> run;
};
struct CompileRequest {
  const PreparedModel* model = nullptr;
  Quantizer* quantizer = nullptr;                 // null: weights stay float32
  const CalibrationSet* calibration = nullptr;
  std::vector<GraphPass> passes;                  // caller passes, in order
  std::string artifact_path;                      // written atomically
  std::string reference_path;                     // "" or: also write the unquantized artifact here
  std::string debug_record_path;                  // JSON debug record, written atomically
  std::function<void(const std::string&)> progress;  // optional: one line per event
};
struct CompileResult {
  std::string artifact_path, reference_path, debug_record_path;
  uint64_t artifact_bytes = 0;
  int64_t max_context_len = 0;
  std::vector<std::string> methods;
  std::vector<std::string> pass_log;  // every transform in the order it ran ("caller:<name>", "backend:<name>")
  nlohmann::json quantization;        // the quantizer's report (null when none ran)
};
class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual std::string backend() const = 0;
  virtual nlohmann::json Fingerprint() const = 0;
  virtual Result<CompileResult> Compile(const CompileRequest& request) = 0;
};

// ---- inference (device runners) ---------------------------------------------------------------
struct DeviceRequest {
  std::string artifact_path;            // local path; the runner pushes it
  std::vector<std::string> prompts;
  int64_t max_new_tokens = 64;
  double temperature = 0, top_p = 1, min_p = 0, repetition_penalty = 1;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool stop_on_eos = true;
  bool trace = false;                   // per-op Chrome trace of the run
  nlohmann::json ToJson() const;        // artifact_path → its file name (the pushed copy)
  static Result<DeviceRequest> FromJson(const nlohmann::json& j);
};
struct GenerationOutput {
  std::string prompt;
  std::vector<int32_t> prompt_ids, generated_ids;
  std::string text;
  std::string stop_reason;
  llm::GenerationStats stats;
};
struct DeviceResult {
  std::vector<GenerationOutput> outputs;
  std::string trace_json;  // Chrome trace ("" when not requested)
  std::string device;      // where it ran
  nlohmann::json ToJson() const;
  static Result<DeviceResult> FromJson(const nlohmann::json& j);
};
// push (artifact, tokenizer — embedded in the artifact —, prompts, options) → execute → pull.
class DeviceRunner {
 public:
  virtual ~DeviceRunner() = default;
  virtual std::string name() const = 0;
  virtual nlohmann::json Fingerprint() const = 0;
  virtual Status Push(const DeviceRequest& request) = 0;
  virtual Status Execute() = 0;
  virtual Result<DeviceResult> Pull() = 0;
  Result<DeviceResult> Run(const DeviceRequest& request) {
    SLM_RETURN_IF_ERROR(Push(request));
    SLM_RETURN_IF_ERROR(Execute());
    return Pull();
  }
};

// ---- evaluation -------------------------------------------------------------------------------
struct EvalRequest {
  std::string artifact_path;
  std::string reference_path;  // unquantized artifact; "" → compare with itself
  std::string text_path;       // perplexity text; "" → no perplexity
  const DeviceResult* inference = nullptr;  // speed figures of the run, when inference ran
};
struct EvalResult {
  bool has_perplexity = false;
  llm::PerplexityResult perplexity;
  bool has_comparison = false;
  llm::LogitsComparison comparison;
  nlohmann::json speed;  // from the inference run
  nlohmann::json ToJson() const;
  static EvalResult FromJson(const nlohmann::json& j);
};
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual std::string name() const = 0;
  virtual nlohmann::json Fingerprint() const = 0;
  virtual Result<EvalResult> Evaluate(const EvalRequest& request) = 0;
};

// ---- registry ---------------------------------------------------------------------------------
// A factory reads its options (recording problems in opts.diag()) and returns the adapter; it
// returns null only after recording why.
template <typename T>
using AdapterFactory = std::function<std::unique_ptr<T>(Options& opts)>;

template <typename T>
class FactoryTable {
 public:
  void Register(const std::string& name, AdapterFactory<T> f) { table_[name] = std::move(f); }
  const AdapterFactory<T>* Find(const std::string& name) const {
    auto it = table_.find(name);
    return it == table_.end() ? nullptr : &it->second;
  }
  std::string Names() const {
    std::string s;
    for (const auto& [n, f] : table_) s += (s.empty() ? "" : ", ") + n;
    return s;
  }

 private:
  std::map<std::string, AdapterFactory<T>> table_;
};

struct AdapterRegistry {
  FactoryTable<ModelLoader> model_loaders;
  FactoryTable<CalibrationData> calibration;
  FactoryTable<Quantizer> quantizers;
  FactoryTable<Compiler> compilers;
  FactoryTable<DeviceRunner> device_runners;
  FactoryTable<Evaluator> evaluators;
  // Named graph passes selectable from the config (compilation.passes: [name, ...]).
  std::map<std::string, GraphPass> passes;

  // The built-in adapters: loader "hf"; calibration "text_file", "jsonl", "random"; quantizer
  // "none" (+ the schemes of src/quant when present); compiler "cpu"; device runners "local",
  // "process", "ssh"; evaluator "default"; pass "validate".
  static AdapterRegistry Builtin();
};

// Instances a C++ caller injects; each replaces the adapter the config names for that role (the
// config's options for that role are then not read). `registry` adds or replaces names.
struct AdapterOverrides {
  std::shared_ptr<ModelLoader> model_loader;
  std::shared_ptr<CalibrationData> calibration;
  std::shared_ptr<Quantizer> quantizer;
  std::shared_ptr<Compiler> compiler;
  std::shared_ptr<DeviceRunner> device_runner;
  std::shared_ptr<Evaluator> evaluator;
  std::vector<GraphPass> passes;  // caller passes, run after the config's named passes
  const AdapterRegistry* registry = nullptr;  // null → AdapterRegistry::Builtin()
};

// Executes a device request in-process in `workdir` (the artifact path resolved against it):
// the body of the `local` runner and of `staticlm device-exec`, so all runners share it.
Result<DeviceResult> ExecuteDeviceRequest(const DeviceRequest& request, const std::string& workdir);

// Helpers shared by adapters and stages.
Result<uint64_t> HashFile(const std::string& path);  // XXH3-64 of the contents
std::string HexU64(uint64_t v);
uint64_t HashString(const std::string& s);
// Runs argv (no shell), waiting; stdout+stderr captured into *output when non-null.
Result<int> RunProcess(const std::vector<std::string>& argv, std::string* output,
                       const std::string& cwd = "");
// Path of the running executable (/proc/self/exe).
std::string SelfExecutable();

}  // namespace slm::pipeline
