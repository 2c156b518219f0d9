#include "model/compiler.h"

#include <sys/stat.h>

#include <algorithm>

#include "core/mapped_file.h"
#include "graph/graph.h"
#include "io/artifact_writer.h"
#include "graph/state_outputs.h"
#include "io/contract_metadata.h"
#include "io/safetensors.h"
#include "llm/tokenizer_factory.h"
#include "model/graph_builder.h"
#include "model/model_spec.h"

namespace slm::model {
namespace {

io::ContractMetadata MakeMetadata(const ModelSpec& spec, const CacheLayout& cache,
                                  const std::vector<model::MethodOptions>& methods,
                                  int64_t max_context_len, const std::string& tokenizer_kind) {
  io::ContractMetadata m;
  m.max_context_len = max_context_len;
  m.vocab_size = spec.vocab_size;
  m.bos_id = spec.bos_id;
  m.eos_ids = spec.eos_ids;
  m.pad_id = spec.pad_id;  // none stays none (JSON null), never 0
  m.add_bos = spec.add_bos;
  m.add_eos = spec.add_eos;
  for (const MethodOptions& mo : methods) {
    m.methods.push_back({mo.name, mo.step > 1 ? "prefill" : "decode", mo.step,
                         mo.logits_selected ? "selected" : "all"});
  }
  m.groups = cache.groups;
  m.layers = cache.layers;
  m.tokenizer_kind = tokenizer_kind;
  m.chat_template = spec.chat_template;
  m.chat_templates = spec.chat_templates;
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

Result<PreparedCompile> PrepareCompile(const std::string& dir, const CompileOptions& options) {
  SLM_ASSIGN_OR_RETURN(ModelSpec spec, LoadModelSpec(dir));
  SLM_ASSIGN_OR_RETURN(io::SafetensorsCheckpoint ckpt, io::SafetensorsCheckpoint::OpenDir(dir));

  int64_t max_ctx = options.max_context_len;
  // Default: the model's context, capped at 2048 and at what a static graph reproduces exactly
  // (longrope: original_max_position_embeddings).
  if (max_ctx == 0) max_ctx = std::min<int64_t>(LongestStaticContext(spec), 2048);
  if (max_ctx < 1) return InvalidArgument("--max-context must be >= 1, got " + std::to_string(max_ctx));
  SLM_RETURN_IF_ERROR(CheckContextSupported(spec, max_ctx));

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

  WeightLookup lookup = [&](const std::string& name, const RowRange& rows) -> Result<WeightRef> {
    const io::TensorInfo* info = ckpt.Find(name);
    if (info == nullptr) {
      return NotFound(dir + ": tensor '" + name + "' is missing from the checkpoint (needed by " +
                      spec.architecture + ")");
    }
    if (rows.count < 0) {
      // Converted to f32 lazily, one tensor at a time, when the writer streams it out.
      return WeightRef{info->shape, io::MakeF32ConstantSource(*info)};
    }
    // A fused projection's part: rows are contiguous in row-major storage, so the slice is a
    // sub-range of the mapped bytes.
    const int64_t dim0 = info->shape.empty() ? 0 : info->shape[0];
    if (rows.begin < 0 || rows.count < 1 || rows.begin + rows.count > dim0) {
      return InvalidArgument(dir + ": tensor '" + name + "' has shape " + ShapeToString(info->shape) +
                             ", expected at least " + std::to_string(rows.begin + rows.count) +
                             " rows (config.json sizes of the fused projection)");
    }
    io::TensorInfo part = *info;
    const uint64_t row_bytes = info->nbytes / static_cast<uint64_t>(dim0);
    part.shape[0] = rows.count;
    part.data = info->data + static_cast<uint64_t>(rows.begin) * row_bytes;
    part.nbytes = static_cast<uint64_t>(rows.count) * row_bytes;
    return WeightRef{part.shape, io::MakeF32ConstantSource(std::move(part))};
  };

  CacheLayout cache = MakeCacheLayout(spec, max_ctx, options.sliding_mode);
  cache.kv_dtype = options.kv_cache;
  std::vector<graph::Graph> graphs;
  for (const MethodOptions& mo : methods) {
    SLM_ASSIGN_OR_RETURN(graph::Graph g, BuildMethodGraph(spec, cache, lookup, mo));
    graphs.push_back(std::move(g));
  }

  // Whichever tokenizer the checkpoint ships (tokenizer.json, vocab.json + merges.txt,
  // SentencePiece or tiktoken tokenizer.model), loaded once so an unsupported one fails here.
  std::string tokenizer_kind, tokenizer_bytes;
  SLM_ASSIGN_OR_RETURN(std::optional<llm::EmbeddedTokenizer> packed, llm::PackCheckpointTokenizer(dir));
  if (packed) {
    tokenizer_kind = packed->kind;
    tokenizer_bytes = std::move(packed->bytes);
  }
  PreparedCompile prepared;
  prepared.metadata = MakeMetadata(spec, cache, methods, max_ctx, tokenizer_kind);
  DescribeCacheFormat(cache, prepared.metadata);
  // BPE tokenizers decide BOS themselves (GPT-2/Qwen2 add none, Llama 3 adds one); the
  // SentencePiece rule (tokenizer_config.json add_bos_token, default true) is the spec's.
  if (packed && packed->kind != "sentencepiece") prepared.metadata.add_bos = packed->adds_bos;
  // EOS: exactly what encode(add_special_tokens=True) appends for the packed tokenizer
  // (SentencePiece: tokenizer_config.json add_eos_token; others: their post-processor).
  if (packed) {
    prepared.metadata.add_eos_ids = packed->suffix_ids;
    prepared.metadata.add_eos = !packed->suffix_ids.empty();
  }
  if (options.state_outputs) {
    // Every method returns the same states, so the bindings of the last one describe them all.
    for (graph::Graph& g : graphs) {
      SLM_ASSIGN_OR_RETURN(auto bindings, graph::AddStateOutputs(g));
      prepared.metadata.state_outputs.clear();
      for (const auto& b : bindings) prepared.metadata.state_outputs.push_back({b.output, b.binds});
    }
  }
  prepared.spec = std::move(spec);
  prepared.methods = std::move(methods);
  prepared.graphs = std::move(graphs);
  prepared.tokenizer_kind = std::move(tokenizer_kind);
  prepared.tokenizer_bytes = std::move(tokenizer_bytes);
  prepared.max_context_len = max_ctx;
  return prepared;
}

Result<CompileReport> WritePreparedArtifact(PreparedCompile prepared, const std::string& out_path) {
  io::ArtifactContents contents;
  contents.methods = &prepared.graphs;
  contents.metadata_json = prepared.metadata.ToJson().dump();
  contents.tokenizer_kind = prepared.tokenizer_kind;
  contents.tokenizer_bytes = std::move(prepared.tokenizer_bytes);
  SLM_RETURN_IF_ERROR(io::WriteArtifact(out_path, std::move(contents)));

  CompileReport report;
  report.artifact_path = out_path;
  struct stat st {};
  if (::stat(out_path.c_str(), &st) == 0) report.artifact_bytes = static_cast<uint64_t>(st.st_size);
  report.max_context_len = prepared.max_context_len;
  for (const MethodOptions& mo : prepared.methods) report.methods.push_back(mo.name);
  return report;
}

Result<CompileReport> CompileCheckpoint(const std::string& dir, const std::string& out_path,
                                        const CompileOptions& options) {
  SLM_ASSIGN_OR_RETURN(PreparedCompile prepared, PrepareCompile(dir, options));
  return WritePreparedArtifact(std::move(prepared), out_path);
}

}  // namespace slm::model
