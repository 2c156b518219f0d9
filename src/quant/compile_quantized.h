// compile + quantize: PrepareCompile → QuantizeGraphs → metadata → WritePreparedArtifact.
// The quantization report is recorded in the artifact metadata under model.quantization
// (per-tensor scheme, sizes, weight SQNR) and model.weights_dtype becomes the linear scheme.
#pragma once

#include <string>

#include "core/status.h"
#include "model/compiler.h"
#include "quant/quantize.h"

namespace slm::quant {

struct QuantCompileResult {
  model::CompileReport compile;
  QuantReport quant;
};

// Adds the quantization report to prepared.metadata (model.quantization, model.weights_dtype).
void RecordQuantization(const QuantReport& report, const QuantConfig& config,
                        model::PreparedCompile& prepared);

Result<QuantCompileResult> CompileQuantized(const std::string& checkpoint_dir,
                                            const std::string& artifact_path,
                                            const model::CompileOptions& options,
                                            const QuantConfig& config);

}  // namespace slm::quant
