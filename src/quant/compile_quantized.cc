#include "quant/compile_quantized.h"

namespace slm::quant {

void RecordQuantization(const QuantReport& report, const QuantConfig& config,
                        model::PreparedCompile& prepared) {
  nlohmann::json q = report.ToJson();
  q["linear"] = SchemeName(config.linear);
  q["embeddings"] = SchemeName(config.embeddings);
  q["lm_head"] = config.quantize_lm_head ? SchemeName(config.linear) : "none";
  prepared.metadata.model["quantization"] = std::move(q);
  if (!report.tensors.empty()) prepared.metadata.model["weights_dtype"] = SchemeName(config.linear);
}

Result<QuantCompileResult> CompileQuantized(const std::string& checkpoint_dir,
                                            const std::string& artifact_path,
                                            const model::CompileOptions& options,
                                            const QuantConfig& config) {
  SLM_ASSIGN_OR_RETURN(model::PreparedCompile prepared, model::PrepareCompile(checkpoint_dir, options));
  QuantCompileResult result;
  SLM_ASSIGN_OR_RETURN(result.quant, QuantizeGraphs(prepared.graphs, config));
  RecordQuantization(result.quant, config, prepared);
  SLM_ASSIGN_OR_RETURN(result.compile, model::WritePreparedArtifact(std::move(prepared), artifact_path));
  return result;
}

}  // namespace slm::quant
