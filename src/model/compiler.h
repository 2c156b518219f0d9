// compile: HF checkpoint directory → one artifact file (fp32 CPU backend).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"
#include "io/contract_metadata.h"
#include "model/graph_builder.h"
#include "model/model_spec.h"

namespace slm::model {

struct CompileOptions {
  int64_t max_context_len = 0;        // 0 → min(LongestStaticContext(spec), 2048)
  std::vector<int64_t> prefill_steps = {32};  // one prefill method per step (> 1)
  bool logits_selected = true;        // prefill returns only the selected row
  // Methods also return their updated caches ("k_cache_out.<i>" ...; graph/state_outputs.h),
  // listed in the metadata's state_outputs. Token-identical to the in-place form.
  bool state_outputs = false;
  // Cache of sliding-window layers: a ring of `window` slots, or full-length (max context,
  // window enforced by the mask). Ignored by models without sliding layers.
  SlidingMode sliding_mode = SlidingMode::kRing;
  // Element type of the KV caches: f32, or int8 with per-(token, head) scales (--kv-cache).
  KvCacheDType kv_cache = KvCacheDType::kF32;
};

struct CompileReport {
  std::string artifact_path;
  uint64_t artifact_bytes = 0;
  int64_t max_context_len = 0;
  std::vector<std::string> methods;
};

// The two halves of CompileCheckpoint, for callers (the pipeline) that rewrite the graphs in
// between (quantization, their own passes). Prepare: LoadModelSpec + checkpoint open + one
// graph per method, weights still lazy (each source keeps its checkpoint file mapped).
struct PreparedCompile {
  ModelSpec spec;
  std::vector<MethodOptions> methods;   // prefill(s) ascending, then decode
  std::vector<graph::Graph> graphs;     // one per method, same order
  io::ContractMetadata metadata;        // written as the artifact's hf_static metadata
  std::string tokenizer_kind, tokenizer_bytes;
  int64_t max_context_len = 0;
};
Result<PreparedCompile> PrepareCompile(const std::string& checkpoint_dir, const CompileOptions& options);
// Serializes prepared (possibly rewritten) graphs into one artifact, atomically.
Result<CompileReport> WritePreparedArtifact(PreparedCompile prepared, const std::string& artifact_path);

// PrepareCompile + WritePreparedArtifact.
Result<CompileReport> CompileCheckpoint(const std::string& checkpoint_dir,
                                        const std::string& artifact_path,
                                        const CompileOptions& options);

}  // namespace slm::model
