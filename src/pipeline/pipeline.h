// The GenAI pipeline: model_preparation → quantization → compilation → inference → evaluation.
//
// Each Stage delegates to a Strategy registered per (stage, engine); strategies do their work
// only through the injectable adapters of adapters.h. The one public construction path is
// Pipeline::FromConfig(config, overrides): the YAML file and the CLI go through it too, select
// every adapter by name with options, and C++ callers inject instances via AdapterOverrides.
//
// FromConfig validates the whole context (paths, names, option types) before any stage runs
// and reports every problem at once with its config line. Run() is resumable: a manifest in the
// artifact dir records each stage's input key (content hashes of the checkpoint files, the
// config section and adapter fingerprints, the tool version, the upstream stage's key) and its
// outputs; a stage whose key and outputs match is reused, so changing one option re-runs that
// stage and those downstream of it. Every file is written to a temp name and renamed.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "pipeline/adapters.h"
#include "pipeline/config.h"

namespace slm::pipeline {

enum class StageId : int { kModelPreparation = 0, kQuantization, kCompilation, kInference, kEvaluation };
inline constexpr int kNumStages = 5;
const char* StageName(StageId s);
Result<StageId> ParseStage(const std::string& name);

// A stage failure: names the stage and wraps the cause. A cause that already is a stage error
// is passed through unchanged (never wrapped twice).
struct StageError {
  StageId stage;
  Status cause;
  Status ToStatus() const;
};
bool IsStageErrorStatus(const Status& s);
Status WrapStageError(StageId stage, const Status& cause);

// Typed per-stage configs (read from the config's stages.<name> sections).
struct PreparationConfig {
  std::string model_path;
};
struct QuantizationConfig {};
struct CompilationConfig {
  std::vector<std::string> pass_names;  // named passes from the registry, run before caller passes
};
struct InferenceConfig {
  DeviceRequest request;  // artifact_path filled from the compilation output
};
struct EvaluationConfig {
  std::string text_path;
};

struct PipelineContext {
  std::string name;
  std::string model_path;
  std::string backend = "cpu";
  std::string artifact_dir;
  std::vector<std::string> prompts;
  std::array<bool, kNumStages> enabled{true, true, true, true, true};
  std::array<std::string, kNumStages> engine{"default", "default", "default", "default", "default"};
  std::array<nlohmann::json, kNumStages> sections;  // each stage's config section, for its key
  PreparationConfig preparation;
  QuantizationConfig quantization;
  CompilationConfig compilation;
  InferenceConfig inference;
  EvaluationConfig evaluation;
};

struct QuantizationOutput {
  std::string scheme;
  CalibrationSet calibration;
};

// The typed outputs of the stages that ran or were reused.
struct PipelineState {
  std::optional<PreparedModel> prepared;
  std::optional<QuantizationOutput> quantized;
  std::optional<CompileResult> compiled;
  std::optional<DeviceResult> inference;
  std::optional<EvalResult> evaluation;
};

struct Adapters {
  std::shared_ptr<ModelLoader> model_loader;
  std::shared_ptr<CalibrationData> calibration;  // null: no calibration configured
  std::shared_ptr<Quantizer> quantizer;
  std::shared_ptr<Compiler> compiler;
  std::shared_ptr<DeviceRunner> device_runner;
  std::shared_ptr<Evaluator> evaluator;
  std::vector<GraphPass> passes;  // named passes, then caller passes
};

// What a strategy sees: the validated context, the adapters, the state (typed inputs from
// upstream stages, its own typed output to fill), where to write files, and a progress sink.
struct StageRun {
  const PipelineContext& context;
  Adapters& adapters;
  PipelineState& state;
  std::vector<std::string> outputs;  // files the strategy produced (manifest hashes them)
  std::function<void(const std::string&)> progress;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual Status Run(StageRun& run) = 0;
};
using StrategyFactory = std::function<std::unique_ptr<Strategy>()>;

// Strategies per (stage, engine). Builtin engine "default" for every stage.
class StrategyRegistry {
 public:
  static StrategyRegistry& Global();
  void Register(StageId stage, const std::string& engine, StrategyFactory f);
  const StrategyFactory* Find(StageId stage, const std::string& engine) const;
  std::string Engines(StageId stage) const;

 private:
  std::map<std::pair<int, std::string>, StrategyFactory> table_;
};

struct RunOptions {
  std::optional<StageId> only;  // run just this stage (upstream must be finished)
  std::optional<StageId> from;  // re-run this stage and everything after it
  bool force = false;           // re-run every enabled stage
  bool progress = true;         // progress lines on stderr
};

struct StageReport {
  StageId stage;
  std::string status;  // "ran" | "reused" | "skipped" | "not selected"
  std::string reason;  // why it ran
  double ms = 0;
  std::string key;
};

struct RunReport {
  std::vector<StageReport> stages;
  PipelineState state;
  double total_ms = 0;
  std::string report_json_path, report_html_path, manifest_path;
  nlohmann::json report;  // the content of report.json
};

class Pipeline {
 public:
  // The one construction path. `config` is a parsed YAML file or a C++-built ConfigDoc.
  static Result<std::unique_ptr<Pipeline>> FromConfig(const ConfigDoc& config, AdapterOverrides overrides = {});
  static Result<std::unique_ptr<Pipeline>> FromYamlFile(const std::string& path, AdapterOverrides overrides = {});

  // Runs the stages; on failure returns the StageError's status (also kept in last_error()).
  Result<RunReport> Run(const RunOptions& options = {});
  const PipelineContext& context() const { return ctx_; }
  const Adapters& adapters() const { return adapters_; }
  const std::optional<StageError>& last_error() const { return last_error_; }

 private:
  Pipeline() = default;
  PipelineContext ctx_;
  Adapters adapters_;
  std::optional<StageError> last_error_;
};

// Writes report.json and the self-contained report.html into the artifact dir.
Status WriteReports(const PipelineContext& ctx, RunReport& report);

// The version recorded in manifests (a change re-runs every stage).
std::string ToolVersion();

}  // namespace slm::pipeline
