// compile: HF checkpoint directory → one artifact file (fp32 CPU backend).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace slm::model {

struct CompileOptions {
  int64_t max_context_len = 0;        // 0 → min(max_position_embeddings, 2048)
  std::vector<int64_t> prefill_steps = {32};  // one prefill method per step (> 1)
  bool logits_selected = true;        // prefill returns only the selected row
};

struct CompileReport {
  std::string artifact_path;
  uint64_t artifact_bytes = 0;
  int64_t max_context_len = 0;
  std::vector<std::string> methods;
};

Result<CompileReport> CompileCheckpoint(const std::string& checkpoint_dir,
                                        const std::string& artifact_path,
                                        const CompileOptions& options);

}  // namespace slm::model
