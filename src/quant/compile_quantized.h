// compile + quantize: PrepareCompile → (calibration) → QuantizeGraphs → metadata →
// WritePreparedArtifact. The quantization report is recorded in the artifact metadata under
// model.quantization (per-tensor scheme, method, sizes, weight SQNR, output SQNR before/after
// when calibrated) and model.weights_dtype becomes the linear scheme.
#pragma once

#include <string>

#include "core/status.h"
#include "model/compiler.h"
#include "quant/calibration_stats.h"
#include "quant/quantize.h"

namespace slm::quant {

struct QuantCompileResult {
  model::CompileReport compile;
  QuantReport quant;
};

// Adds the quantization report to prepared.metadata (model.quantization, model.weights_dtype).
void RecordQuantization(const QuantReport& report, const QuantConfig& config,
                        model::PreparedCompile& prepared);

// Quantizes prepared's graphs in place and records the report in its metadata. With a
// calibration input, first collects the activation statistics on the f32 model (required by
// Method::kGptq; with rtn they only add output SQNR figures to the report).
Result<QuantReport> QuantizePrepared(model::PreparedCompile& prepared, const QuantConfig& config,
                                     const CalibrationInput& calibration = {});

Result<QuantCompileResult> CompileQuantized(const std::string& checkpoint_dir,
                                            const std::string& artifact_path,
                                            const model::CompileOptions& options,
                                            const QuantConfig& config,
                                            const CalibrationInput& calibration = {});

}  // namespace slm::quant
