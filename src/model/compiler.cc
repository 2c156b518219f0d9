#include "model/compiler.h"

#include <sys/stat.h>

#include <algorithm>

#include "core/mapped_file.h"
#include "graph/graph.h"
#include "io/artifact_writer.h"
#include "io/contract_metadata.h"
#include "io/safetensors.h"
#include "model/graph_builder.h"
#include "model/model_spec.h"

namespace slm::model {
namespace {

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

io::ContractMetadata MakeMetadata(const ModelSpec& spec, const CacheLayout& cache,
                                  const std::vector<model::MethodOptions>& methods,
                                  int64_t max_context_len, const std::string& tokenizer_kind) {
  io::ContractMetadata m;
  m.max_context_len = max_context_len;
  m.vocab_size = spec.vocab_size;
  m.bos_id = spec.bos_id;
  m.eos_ids = spec.eos_ids;
  m.pad_id = spec.pad_id.value_or(0);
  m.add_bos = spec.add_bos;
  for (const MethodOptions& mo : methods) {
    m.methods.push_back({mo.name, mo.step > 1 ? "prefill" : "decode", mo.step,
                         mo.logits_selected ? "selected" : "all"});
  }
  m.groups = cache.groups;
  m.layers = cache.layers;
  m.tokenizer_kind = tokenizer_kind;
  m.chat_template = spec.chat_template;
  m.generation_defaults = spec.generation_defaults;
  m.model = {{"architecture", spec.architecture},
             {"model_type", spec.model_type},
             {"hidden_size", spec.hidden_size},
             {"num_layers", spec.num_layers},
             {"num_heads", spec.num_heads},
             {"num_kv_heads", spec.num_kv_heads},
             {"head_dim", spec.head_dim},
             {"intermediate_size", spec.intermediate_size},
             {"weights_dtype", "float32"}};
  return m;
}

}  // namespace

Result<CompileReport> CompileCheckpoint(const std::string& dir, const std::string& out_path,
                                        const CompileOptions& options) {
  SLM_ASSIGN_OR_RETURN(ModelSpec spec, LoadModelSpec(dir));
  SLM_ASSIGN_OR_RETURN(io::SafetensorsCheckpoint ckpt, io::SafetensorsCheckpoint::OpenDir(dir));

  int64_t max_ctx = options.max_context_len;
  if (max_ctx == 0) max_ctx = std::min<int64_t>(spec.max_position_embeddings, 2048);
  if (max_ctx < 1) return InvalidArgument("--max-context must be >= 1, got " + std::to_string(max_ctx));

  std::vector<int64_t> steps = options.prefill_steps;
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::vector<MethodOptions> methods;
  for (int64_t s : steps) {
    if (s < 2) return InvalidArgument("prefill step must be >= 2, got " + std::to_string(s));
    if (s > max_ctx) {
      return InvalidArgument("prefill step " + std::to_string(s) + " exceeds max context " +
                             std::to_string(max_ctx));
    }
    std::string name = steps.size() == 1 ? "prefill" : "prefill_" + std::to_string(s);
    methods.push_back({name, s, options.logits_selected});
  }
  methods.push_back({"decode", 1, false});

  WeightLookup lookup = [&](const std::string& name) -> Result<WeightRef> {
    const io::TensorInfo* info = ckpt.Find(name);
    if (info == nullptr) {
      return NotFound(dir + ": tensor '" + name + "' is missing from the checkpoint (needed by " +
                      spec.architecture + ")");
    }
    // Converted to f32 lazily, one tensor at a time, when the writer streams it out.
    return WeightRef{info->shape, io::MakeF32ConstantSource(*info)};
  };

  CacheLayout cache = MakeCacheLayout(spec, max_ctx);
  std::vector<graph::Graph> graphs;
  for (const MethodOptions& mo : methods) {
    SLM_ASSIGN_OR_RETURN(graph::Graph g, BuildMethodGraph(spec, cache, lookup, mo));
    graphs.push_back(std::move(g));
  }

  std::string tokenizer_kind, tokenizer_bytes;
  const std::string sp_path = dir + "/tokenizer.model";
  if (IsFile(sp_path)) {
    SLM_ASSIGN_OR_RETURN(tokenizer_bytes, ReadFileToString(sp_path));
    tokenizer_kind = "sentencepiece";
  }
  io::ContractMetadata meta = MakeMetadata(spec, cache, methods, max_ctx, tokenizer_kind);

  io::ArtifactContents contents;
  contents.methods = &graphs;
  contents.metadata_json = meta.ToJson().dump();
  contents.tokenizer_kind = tokenizer_kind;
  contents.tokenizer_bytes = std::move(tokenizer_bytes);
  SLM_RETURN_IF_ERROR(io::WriteArtifact(out_path, std::move(contents)));

  CompileReport report;
  report.artifact_path = out_path;
  struct stat st {};
  if (::stat(out_path.c_str(), &st) == 0) report.artifact_bytes = static_cast<uint64_t>(st.st_size);
  report.max_context_len = max_ctx;
  for (const MethodOptions& mo : methods) report.methods.push_back(mo.name);
  return report;
}

}  // namespace slm::model
