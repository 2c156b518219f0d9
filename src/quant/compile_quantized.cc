#include "quant/compile_quantized.h"

#include <optional>

namespace slm::quant {

void RecordQuantization(const QuantReport& report, const QuantConfig& config,
                        model::PreparedCompile& prepared) {
  nlohmann::json q = report.ToJson();
  q["linear"] = SchemeName(config.linear);
  q["embeddings"] = SchemeName(config.embeddings);
  q["lm_head"] = config.quantize_lm_head ? SchemeName(config.linear) : "none";
  q["method"] = MethodName(config.method);
  q["clip_search"] = config.clip_search;  // int4 round to nearest: searched group ranges
  q.update(MethodOptionsJson(config));
  prepared.metadata.model["quantization"] = std::move(q);
  if (!report.tensors.empty()) prepared.metadata.model["weights_dtype"] = SchemeName(config.linear);
}

Result<QuantReport> QuantizePrepared(model::PreparedCompile& prepared, const QuantConfig& config,
                                     const CalibrationInput& calibration) {
  std::optional<CalibrationStats> stats;
  if (!calibration.empty()) {
    SLM_ASSIGN_OR_RETURN(stats, CollectCalibrationStats(prepared, calibration));
  }
  SLM_ASSIGN_OR_RETURN(QuantReport report, QuantizeGraphs(prepared.graphs, config, stats ? &*stats : nullptr));
  RecordQuantization(report, config, prepared);
  return report;
}

Result<QuantCompileResult> CompileQuantized(const std::string& checkpoint_dir,
                                            const std::string& artifact_path,
                                            const model::CompileOptions& options,
                                            const QuantConfig& config,
                                            const CalibrationInput& calibration) {
  SLM_ASSIGN_OR_RETURN(model::PreparedCompile prepared, model::PrepareCompile(checkpoint_dir, options));
  QuantCompileResult result;
  SLM_ASSIGN_OR_RETURN(result.quant, QuantizePrepared(prepared, config, calibration));
  SLM_ASSIGN_OR_RETURN(result.compile, model::WritePreparedArtifact(std::move(prepared), artifact_path));
  return result;
}

}  // namespace slm::quant
