#include "model/graph_builder.h"

#include <cmath>

#include "model/rope.h"

namespace slm::model {
namespace {

using graph::Graph;
using graph::Op;
using graph::OpKind;

// Adds graph values and ops for one method; keeps the bookkeeping (names, ids) in one place so
// the per-layer code below reads like the model's forward pass.
class Builder {
 public:
  Builder(const ModelSpec& spec, const WeightLookup& weights, Graph& g)
      : spec_(spec), weights_(weights), g_(g) {}

  // A checkpoint weight as a graph constant, checked against the shape the model needs.
  Result<int32_t> Weight(const std::string& hf_name, const Shape& expected) {
    int32_t existing = g_.FindValue(hf_name);
    if (existing >= 0) return existing;  // tied weights: one value, one constant
    SLM_ASSIGN_OR_RETURN(WeightRef ref, weights_(hf_name));
    if (ref.shape != expected) {
      return InvalidArgument("tensor '" + hf_name + "': shape " + ShapeToString(ref.shape) +
                             ", expected " + ShapeToString(expected) + " from config.json");
    }
    return g_.AddConstant(hf_name, DType::kF32, expected, std::move(ref.source));
  }

  int32_t Tmp(const std::string& name, Shape shape) {
    return g_.AddIntermediate(name, DType::kF32, std::move(shape));
  }

  void Emit(OpKind kind, std::vector<int32_t> in, std::vector<int32_t> out, std::string debug,
            std::vector<int64_t> ints = {}, std::vector<float> floats = {}) {
    Op op;
    op.kind = kind;
    op.inputs = std::move(in);
    op.outputs = std::move(out);
    op.ints = std::move(ints);
    op.floats = std::move(floats);
    op.debug = std::move(debug);
    g_.AddOp(std::move(op));
  }

  // y[R,N] = x[R,K]·Wᵀ (+ b)
  Result<int32_t> Linear(int32_t x, int64_t rows, const std::string& prefix, int64_t k, int64_t n,
                         bool bias, const std::string& out_name) {
    SLM_ASSIGN_OR_RETURN(int32_t w, Weight(prefix + ".weight", {n, k}));
    std::vector<int32_t> in = {x, w};
    if (bias) {
      SLM_ASSIGN_OR_RETURN(int32_t b, Weight(prefix + ".bias", {n}));
      in.push_back(b);
    }
    int32_t y = Tmp(out_name, {rows, n});
    Emit(OpKind::kMatMul, in, {y}, prefix);
    return y;
  }

  Result<int32_t> Norm(int32_t x, int64_t rows, const std::string& weight_name,
                       const std::string& out_name) {
    const int64_t d = spec_.hidden_size;
    SLM_ASSIGN_OR_RETURN(int32_t w, Weight(weight_name, {d}));
    int32_t y = Tmp(out_name, {rows, d});
    Emit(OpKind::kRmsNorm, {x, w}, {y}, weight_name, {0},
         {static_cast<float>(spec_.rms_norm_eps)});
    return y;
  }

 private:
  const ModelSpec& spec_;
  const WeightLookup& weights_;
  Graph& g_;
};

}  // namespace

CacheLayout MakeCacheLayout(const ModelSpec& spec, int64_t max_context_len) {
  CacheLayout c;
  c.groups.push_back({"full", max_context_len, 0});
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    c.layers.push_back({"full", spec.num_kv_heads, spec.head_dim});
  }
  return c;
}

Result<Graph> BuildMethodGraph(const ModelSpec& spec, const CacheLayout& cache,
                               const WeightLookup& weights, const MethodOptions& opt) {
  if (opt.step < 1) return InvalidArgument("method '" + opt.name + "': step must be >= 1");
  if (static_cast<int64_t>(cache.layers.size()) != spec.num_layers) {
    return Internal("cache layout has " + std::to_string(cache.layers.size()) + " layers, model " +
                    std::to_string(spec.num_layers));
  }
  Graph g;
  g.name = opt.name;
  Builder b(spec, weights, g);
  const int64_t T = opt.step;
  const int64_t D = spec.hidden_size;
  const int64_t hd = spec.head_dim;
  const int64_t Hq = spec.num_heads, Hkv = spec.num_kv_heads;

  // Inputs, in the contract's order.
  const int32_t ids = g.AddInput("input_ids", DType::kI32, {1, T});
  const int32_t pos = g.AddInput("input_pos", DType::kI32, {1, T});
  std::vector<int32_t> masks;
  for (const io::CacheGroup& grp : cache.groups) {
    masks.push_back(g.AddInput("attn_mask." + grp.name, DType::kF32, {1, T, grp.cache_len + T}));
  }
  const int32_t logits_row =
      opt.logits_selected ? g.AddInput("logits_row", DType::kI32, {1}) : -1;
  std::vector<int32_t> k_caches, v_caches;
  std::vector<int64_t> layer_group;
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const io::CacheLayer& l = cache.layers[i];
    int64_t gi = -1;
    for (size_t j = 0; j < cache.groups.size(); ++j) {
      if (cache.groups[j].name == l.group) gi = static_cast<int64_t>(j);
    }
    if (gi < 0) return Internal("layer " + std::to_string(i) + ": unknown cache group " + l.group);
    layer_group.push_back(gi);
    const Shape cs = {1, l.n_kv_heads, cache.groups[gi].cache_len, l.head_dim};
    k_caches.push_back(g.AddInput("k_cache." + std::to_string(i), DType::kF32, cs, graph::ValueKind::kState));
    v_caches.push_back(g.AddInput("v_cache." + std::to_string(i), DType::kF32, cs, graph::ValueKind::kState));
  }

  // Rope table: folded at compile time from the config; identical in every method, so the
  // artifact stores it once.
  RopeTables rope = ComputeRopeTables(spec.rope);
  const int32_t inv_freq = g.AddConstant(
      "rope.inv_freq", DType::kF32, {static_cast<int64_t>(rope.inv_freq.size())},
      graph::MakeF32Constant(rope.inv_freq, "rope inv_freq folded from config.json"));

  SLM_ASSIGN_OR_RETURN(int32_t embed, b.Weight(spec.EmbedName(), {spec.vocab_size, D}));
  int32_t x = b.Tmp("embed.out", {T, D});
  b.Emit(OpKind::kEmbedding, {ids, embed}, {x}, spec.EmbedName(), {}, {1.0f});

  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const std::string L = "layers." + std::to_string(i);
    const std::string P = spec.LayerPrefix(i);
    SLM_ASSIGN_OR_RETURN(int32_t h, b.Norm(x, T, P + ".input_layernorm.weight", L + ".attn_norm"));
    SLM_ASSIGN_OR_RETURN(int32_t q, b.Linear(h, T, P + ".self_attn.q_proj", D, Hq * hd, spec.attention_bias, L + ".q"));
    SLM_ASSIGN_OR_RETURN(int32_t k, b.Linear(h, T, P + ".self_attn.k_proj", D, Hkv * hd, spec.attention_bias, L + ".k"));
    SLM_ASSIGN_OR_RETURN(int32_t v, b.Linear(h, T, P + ".self_attn.v_proj", D, Hkv * hd, spec.attention_bias, L + ".v"));
    const int32_t q_rot = b.Tmp(L + ".q_rope", {T, Hq * hd});
    const int32_t k_rot = b.Tmp(L + ".k_rope", {T, Hkv * hd});
    const std::vector<float> rope_f = {rope.attention_scaling};
    b.Emit(OpKind::kRope, {q, pos, inv_freq}, {q_rot}, P + ".self_attn.rotary_emb(q)", {Hq, hd, spec.rope.rotary_dim}, rope_f);
    b.Emit(OpKind::kRope, {k, pos, inv_freq}, {k_rot}, P + ".self_attn.rotary_emb(k)", {Hkv, hd, spec.rope.rotary_dim}, rope_f);
    const int32_t attn = b.Tmp(L + ".attn", {T, Hq * hd});
    b.Emit(OpKind::kAttention, {q_rot, k_rot, v, k_caches[i], v_caches[i], masks[layer_group[i]]},
           {attn}, P + ".self_attn", {Hq, Hkv, hd}, {scale, 0.0f});
    b.Emit(OpKind::kKvCommit, {k_rot, v, pos, k_caches[i], v_caches[i]}, {}, P + ".self_attn(cache commit)");
    SLM_ASSIGN_OR_RETURN(int32_t o, b.Linear(attn, T, P + ".self_attn.o_proj", Hq * hd, D, spec.attention_bias, L + ".o"));
    const int32_t x1 = b.Tmp(L + ".resid1", {T, D});
    b.Emit(OpKind::kAdd, {x, o}, {x1}, P + "(residual)");
    SLM_ASSIGN_OR_RETURN(int32_t h2, b.Norm(x1, T, P + ".post_attention_layernorm.weight", L + ".mlp_norm"));
    const int64_t F = spec.intermediate_size;
    SLM_ASSIGN_OR_RETURN(int32_t gate, b.Linear(h2, T, P + ".mlp.gate_proj", D, F, spec.mlp_bias, L + ".gate"));
    SLM_ASSIGN_OR_RETURN(int32_t up, b.Linear(h2, T, P + ".mlp.up_proj", D, F, spec.mlp_bias, L + ".up"));
    const int32_t act = b.Tmp(L + ".act", {T, F});
    b.Emit(OpKind::kSwiGlu, {gate, up}, {act}, P + ".mlp.act_fn");
    SLM_ASSIGN_OR_RETURN(int32_t down, b.Linear(act, T, P + ".mlp.down_proj", F, D, spec.mlp_bias, L + ".down"));
    const int32_t x2 = b.Tmp(L + ".resid2", {T, D});
    b.Emit(OpKind::kAdd, {x1, down}, {x2}, P + "(residual)");
    x = x2;
  }

  int64_t rows = T;
  if (opt.logits_selected) {
    // Only the selected row goes through the final norm and the vocab-sized matmul.
    const int32_t sel = b.Tmp("selected_row", {1, D});
    b.Emit(OpKind::kGatherRow, {x, logits_row}, {sel}, "logits_row");
    x = sel;
    rows = 1;
  }
  SLM_ASSIGN_OR_RETURN(int32_t xn, b.Norm(x, rows, spec.FinalNormName(), "final_norm"));
  SLM_ASSIGN_OR_RETURN(int32_t head, b.Weight(spec.LmHeadName(), {spec.vocab_size, D}));
  graph::Value logits;
  logits.name = "logits";
  logits.dtype = DType::kF32;
  logits.shape = {1, rows, spec.vocab_size};
  logits.kind = graph::ValueKind::kOutput;
  const int32_t out = g.AddValue(std::move(logits));
  b.Emit(OpKind::kMatMul, {xn, head}, {out}, spec.LmHeadName());
  g.outputs.push_back(out);
  SLM_RETURN_IF_ERROR(g.Validate());
  return g;
}

}  // namespace slm::model
