// Builds one static-shape graph per method from a ModelSpec: the hf_static v1 signature
// (input_ids, input_pos, attn_mask.<group>, logits_row, k_cache.<i>, v_cache.<i> → logits)
// over the checkpoint's weights, read lazily.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "graph/graph.h"
#include "io/contract_metadata.h"
#include "model/model_spec.h"

namespace slm::model {

// Looks up a checkpoint weight by HF name and returns a lazy f32 source with its shape.
struct WeightRef {
  Shape shape;
  std::shared_ptr<const graph::ConstantSource> source;
};
using WeightLookup = std::function<Result<WeightRef>(const std::string& hf_name)>;

struct MethodOptions {
  std::string name;          // "prefill" / "decode"
  int64_t step = 1;          // T
  bool logits_selected = false;  // [1,1,V] from `logits_row`, else [1,T,V]
};

// Cache geometry shared by all methods of an artifact (one entry per layer, groups by name).
struct CacheLayout {
  std::vector<io::CacheGroup> groups;
  std::vector<io::CacheLayer> layers;
};
CacheLayout MakeCacheLayout(const ModelSpec& spec, int64_t max_context_len);

Result<graph::Graph> BuildMethodGraph(const ModelSpec& spec, const CacheLayout& cache,
                                      const WeightLookup& weights, const MethodOptions& options);

}  // namespace slm::model
