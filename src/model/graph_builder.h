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
// Rows [begin, begin + count) along dim 0 of a checkpoint tensor: one part of a fused
// projection (Phi-3's qkv_proj, gate_up_proj), which is contiguous in row-major storage.
// count < 0 means the whole tensor.
struct RowRange {
  int64_t begin = 0;
  int64_t count = -1;
};
// Returns the tensor (or its row range; the WeightRef's shape is then the slice's) or an error
// naming the tensor (NotFound when missing, InvalidArgument when the range exceeds dim 0).
using WeightLookup =
    std::function<Result<WeightRef>(const std::string& hf_name, const RowRange& rows)>;

struct MethodOptions {
  std::string name;          // "prefill" / "decode"
  int64_t step = 1;          // T
  bool logits_selected = false;  // [1,1,V] from `logits_row`, else [1,T,V]
};

// Element type of the KV caches (compile option --kv-cache).
enum class KvCacheDType {
  kF32,   // cache format kv_f32_v1
  kInt8,  // cache format kv_int8_tokenhead_v1: int8 rows + f32 scales per (token, head)
};
Result<KvCacheDType> ParseKvCacheDType(const std::string& name);  // "f32" | "int8"
const char* KvCacheDTypeName(KvCacheDType t);                       // "f32" | "int8"

// Cache geometry shared by all methods of an artifact (one entry per layer, groups by name).
struct CacheLayout {
  std::vector<io::CacheGroup> groups;
  std::vector<io::CacheLayer> layers;
  KvCacheDType kv_dtype = KvCacheDType::kF32;
};

// Writes the layout's cache dtype, format and extra states (int8: "k_scale.<i>" /
// "v_scale.<i>", [1, Hkv, cache_len] f32) into `meta` (metadata.cache).
void DescribeCacheFormat(const CacheLayout& cache, io::ContractMetadata& meta);

// How sliding-window layers keep their cache.
enum class SlidingMode {
  kRing,        // group "sliding": a ring of cache_len = window slots
  kFullLength,  // group "sliding": cache_len = max_context_len, window W; the mask alone
                // enforces the window (lets a session rewind)
};
Result<SlidingMode> ParseSlidingMode(const std::string& name);  // "ring" | "full-length"
const char* SlidingModeName(SlidingMode mode);

// Groups, in this order, only those some layer uses: "full" (cache_len = max_context_len,
// window 0) and "sliding" (window W = the spec's sliding window; cache_len by `mode`). A layer
// whose window is >= max_context_len can hide nothing and goes to "full".
// Precondition: every sliding layer of `spec` has the same window (true of every config).
CacheLayout MakeCacheLayout(const ModelSpec& spec, int64_t max_context_len,
                            SlidingMode mode = SlidingMode::kRing);

Result<graph::Graph> BuildMethodGraph(const ModelSpec& spec, const CacheLayout& cache,
                                      const WeightLookup& weights, const MethodOptions& options);

}  // namespace slm::model
