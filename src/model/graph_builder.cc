#include "model/graph_builder.h"

#include <cmath>
#include <optional>

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

  // A checkpoint weight (or a row range of one) as a graph constant, checked against the shape
  // the model needs.
  Result<int32_t> Weight(const std::string& hf_name, const Shape& expected, RowRange rows = {}) {
    const std::string name =
        rows.count < 0 ? hf_name
                       : hf_name + "[" + std::to_string(rows.begin) + ":" +
                             std::to_string(rows.begin + rows.count) + "]";
    int32_t existing = g_.FindValue(name);
    if (existing >= 0) return existing;  // tied weights: one value, one constant
    SLM_ASSIGN_OR_RETURN(WeightRef ref, weights_(hf_name, rows));
    if (ref.shape != expected) {
      return InvalidArgument("tensor '" + name + "': shape " + ShapeToString(ref.shape) +
                             ", expected " + ShapeToString(expected) + " from config.json");
    }
    return g_.AddConstant(name, DType::kF32, expected, std::move(ref.source));
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

  // y[R,N] = x[R,K]·Wᵀ (+ b), W = rows `part` of `prefix`.weight (all rows by default).
  Result<int32_t> Linear(int32_t x, int64_t rows, const std::string& prefix, int64_t k, int64_t n,
                         bool bias, const std::string& out_name, RowRange part = {}) {
    if (part.count >= 0) part.count = n;
    SLM_ASSIGN_OR_RETURN(int32_t w, Weight(prefix + ".weight", {n, k}, part));
    std::vector<int32_t> in = {x, w};
    if (bias) {
      SLM_ASSIGN_OR_RETURN(int32_t b, Weight(prefix + ".bias", {n}, part));
      in.push_back(b);
    }
    int32_t y = Tmp(out_name, {rows, n});
    Emit(OpKind::kMatMul, in, {y}, prefix + (part.count >= 0 ? " rows " + std::to_string(part.begin) + "+" + std::to_string(n) : ""));
    return y;
  }

  // RMSNorm of x [rows, width] with a gain of `d` values: d == width normalizes rows,
  // d < width normalizes each d-long chunk (per-head q/k norms).
  Result<int32_t> Norm(int32_t x, int64_t rows, int64_t width, int64_t d,
                       const std::string& weight_name, const std::string& out_name) {
    SLM_ASSIGN_OR_RETURN(int32_t w, Weight(weight_name, {d}));
    int32_t y = Tmp(out_name, {rows, width});
    Emit(OpKind::kRmsNorm, {x, w}, {y}, weight_name, {spec_.norm_add_one ? 1 : 0},
         {static_cast<float>(spec_.rms_norm_eps)});
    return y;
  }
  Result<int32_t> Norm(int32_t x, int64_t rows, const std::string& weight_name,
                       const std::string& out_name) {
    return Norm(x, rows, spec_.hidden_size, spec_.hidden_size, weight_name, out_name);
  }

 private:
  const ModelSpec& spec_;
  const WeightLookup& weights_;
  Graph& g_;
};

}  // namespace

Result<SlidingMode> ParseSlidingMode(const std::string& name) {
  if (name == "ring") return SlidingMode::kRing;
  if (name == "full-length") return SlidingMode::kFullLength;
  return InvalidArgument("sliding mode '" + name + "' is not one of: ring, full-length");
}

const char* SlidingModeName(SlidingMode mode) {
  return mode == SlidingMode::kRing ? "ring" : "full-length";
}

CacheLayout MakeCacheLayout(const ModelSpec& spec, int64_t max_context_len, SlidingMode mode) {
  CacheLayout c;
  int64_t window = 0;
  bool any_full = false;
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const int64_t w = spec.layer_window[i];
    const bool sliding = w > 0 && w < max_context_len;
    if (sliding) window = w;
    any_full = any_full || !sliding;
    c.layers.push_back({sliding ? "sliding" : "full", spec.num_kv_heads, spec.head_dim});
  }
  if (any_full) c.groups.push_back({"full", max_context_len, 0});
  if (window > 0) {
    c.groups.push_back(
        {"sliding", mode == SlidingMode::kRing ? window : max_context_len, window});
  }
  return c;
}

namespace {

// One attention + MLP block, as the family's flags say (see ModelSpec). Returns the residual
// stream after the block.
struct LayerInputs {
  int32_t pos, mask, k_cache, v_cache, inv_freq;
  const RopeSpec* rope;
  float rope_scaling;
};

Result<int32_t> BuildLayer(Builder& b, const ModelSpec& spec, int64_t i, int64_t T, int32_t x,
                           const LayerInputs& in) {
  const std::string L = "layers." + std::to_string(i);
  const std::string P = spec.LayerPrefix(i);
  const int64_t D = spec.hidden_size, hd = spec.head_dim, F = spec.intermediate_size;
  const int64_t Hq = spec.num_heads, Hkv = spec.num_kv_heads;

  SLM_ASSIGN_OR_RETURN(int32_t h, b.Norm(x, T, spec.LayerWeight(i, spec.AttnNormSuffix()), L + ".attn_norm"));
  int32_t q, k, v;
  if (spec.fused_qkv) {
    // qkv_proj rows: [q (Hq*hd); k (Hkv*hd); v (Hkv*hd)], split as transformers slices them.
    const std::string W = P + ".self_attn.qkv_proj";
    SLM_ASSIGN_OR_RETURN(q, b.Linear(h, T, W, D, Hq * hd, spec.qkv_bias, L + ".q", {0, 0}));
    SLM_ASSIGN_OR_RETURN(k, b.Linear(h, T, W, D, Hkv * hd, spec.qkv_bias, L + ".k", {Hq * hd, 0}));
    SLM_ASSIGN_OR_RETURN(v, b.Linear(h, T, W, D, Hkv * hd, spec.qkv_bias, L + ".v", {(Hq + Hkv) * hd, 0}));
  } else {
    SLM_ASSIGN_OR_RETURN(q, b.Linear(h, T, P + ".self_attn.q_proj", D, Hq * hd, spec.qkv_bias, L + ".q"));
    SLM_ASSIGN_OR_RETURN(k, b.Linear(h, T, P + ".self_attn.k_proj", D, Hkv * hd, spec.qkv_bias, L + ".k"));
    SLM_ASSIGN_OR_RETURN(v, b.Linear(h, T, P + ".self_attn.v_proj", D, Hkv * hd, spec.qkv_bias, L + ".v"));
  }
  if (spec.qk_norm) {
    SLM_ASSIGN_OR_RETURN(q, b.Norm(q, T, Hq * hd, hd, P + ".self_attn.q_norm.weight", L + ".q_norm"));
    SLM_ASSIGN_OR_RETURN(k, b.Norm(k, T, Hkv * hd, hd, P + ".self_attn.k_norm.weight", L + ".k_norm"));
  }
  const int32_t q_rot = b.Tmp(L + ".q_rope", {T, Hq * hd});
  const int32_t k_rot = b.Tmp(L + ".k_rope", {T, Hkv * hd});
  const std::vector<float> rope_f = {in.rope_scaling};
  b.Emit(OpKind::kRope, {q, in.pos, in.inv_freq}, {q_rot}, P + ".self_attn.rotary_emb(q)", {Hq, hd, in.rope->rotary_dim}, rope_f);
  b.Emit(OpKind::kRope, {k, in.pos, in.inv_freq}, {k_rot}, P + ".self_attn.rotary_emb(k)", {Hkv, hd, in.rope->rotary_dim}, rope_f);
  const int32_t attn = b.Tmp(L + ".attn", {T, Hq * hd});
  b.Emit(OpKind::kAttention, {q_rot, k_rot, v, in.k_cache, in.v_cache, in.mask}, {attn}, P + ".self_attn",
         {Hq, Hkv, hd}, {static_cast<float>(spec.attn_scale), static_cast<float>(spec.attn_softcap)});
  b.Emit(OpKind::kKvCommit, {k_rot, v, in.pos, in.k_cache, in.v_cache}, {}, P + ".self_attn(cache commit)");
  SLM_ASSIGN_OR_RETURN(int32_t o, b.Linear(attn, T, P + ".self_attn.o_proj", Hq * hd, D, spec.o_bias, L + ".o"));
  if (!spec.AttnOutNormSuffix().empty()) {
    SLM_ASSIGN_OR_RETURN(o, b.Norm(o, T, spec.LayerWeight(i, spec.AttnOutNormSuffix()), L + ".attn_out_norm"));
  }
  const int32_t x1 = b.Tmp(L + ".resid1", {T, D});
  b.Emit(OpKind::kAdd, {x, o}, {x1}, P + "(residual)");

  SLM_ASSIGN_OR_RETURN(int32_t h2, b.Norm(x1, T, spec.LayerWeight(i, spec.MlpNormSuffix()), L + ".mlp_norm"));
  int32_t gate, up;
  if (spec.fused_gate_up) {
    // gate_up_proj rows: [gate (F); up (F)] (transformers: chunk(2, dim=-1)).
    const std::string W = P + ".mlp.gate_up_proj";
    SLM_ASSIGN_OR_RETURN(gate, b.Linear(h2, T, W, D, F, spec.mlp_bias, L + ".gate", {0, 0}));
    SLM_ASSIGN_OR_RETURN(up, b.Linear(h2, T, W, D, F, spec.mlp_bias, L + ".up", {F, 0}));
  } else {
    SLM_ASSIGN_OR_RETURN(gate, b.Linear(h2, T, P + ".mlp.gate_proj", D, F, spec.mlp_bias, L + ".gate"));
    SLM_ASSIGN_OR_RETURN(up, b.Linear(h2, T, P + ".mlp.up_proj", D, F, spec.mlp_bias, L + ".up"));
  }
  const int32_t act = b.Tmp(L + ".act", {T, F});
  // ParseModelSpec admits exactly these two activations.
  const OpKind glu = spec.hidden_act == "silu" ? OpKind::kSwiGlu : OpKind::kGeGlu;
  b.Emit(glu, {gate, up}, {act}, P + ".mlp.act_fn");
  SLM_ASSIGN_OR_RETURN(int32_t down, b.Linear(act, T, P + ".mlp.down_proj", F, D, spec.mlp_bias, L + ".down"));
  if (!spec.MlpOutNormSuffix().empty()) {
    SLM_ASSIGN_OR_RETURN(down, b.Norm(down, T, spec.LayerWeight(i, spec.MlpOutNormSuffix()), L + ".mlp_out_norm"));
  }
  const int32_t x2 = b.Tmp(L + ".resid2", {T, D});
  b.Emit(OpKind::kAdd, {x1, down}, {x2}, P + "(residual)");
  return x2;
}

}  // namespace

Result<Graph> BuildMethodGraph(const ModelSpec& spec, const CacheLayout& cache,
                               const WeightLookup& weights, const MethodOptions& opt) {
  if (opt.step < 1) return InvalidArgument("method '" + opt.name + "': step must be >= 1");
  if (static_cast<int64_t>(cache.layers.size()) != spec.num_layers ||
      static_cast<int64_t>(spec.layer_window.size()) != spec.num_layers) {
    return Internal("cache layout has " + std::to_string(cache.layers.size()) + " layers, model " +
                    std::to_string(spec.num_layers));
  }
  if (spec.hidden_act != "silu" && spec.hidden_act != "gelu_pytorch_tanh") {
    return Unsupported("hidden_act '" + spec.hidden_act + "' has no graph op");
  }
  Graph g;
  g.name = opt.name;
  Builder b(spec, weights, g);
  const int64_t T = opt.step;
  const int64_t D = spec.hidden_size;

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

  // Rope tables: folded at compile time from the config; identical in every method, so the
  // artifact stores each once. Sliding layers may have their own (Gemma 3).
  struct FoldedRope {
    int32_t inv_freq;
    float scaling;
  };
  auto fold = [&](const RopeSpec& r, const std::string& name) {
    RopeTables t = ComputeRopeTables(r);
    const int32_t id = g.AddConstant(
        name, DType::kF32, {static_cast<int64_t>(t.inv_freq.size())},
        graph::MakeF32Constant(t.inv_freq, name + " folded from config.json"));
    return FoldedRope{id, t.attention_scaling};
  };
  const FoldedRope global_rope = fold(spec.rope, "rope.inv_freq");
  std::optional<FoldedRope> local_rope;
  if (spec.local_rope) local_rope = fold(*spec.local_rope, "rope_local.inv_freq");

  SLM_ASSIGN_OR_RETURN(int32_t embed, b.Weight(spec.EmbedName(), {spec.vocab_size, D}));
  int32_t x = b.Tmp("embed.out", {T, D});
  // Gemma: hidden * torch.tensor(hidden_size ** 0.5, dtype=float32).
  const float embed_scale =
      spec.scale_embeddings ? static_cast<float>(std::sqrt(static_cast<double>(D))) : 1.0f;
  b.Emit(OpKind::kEmbedding, {ids, embed}, {x}, spec.EmbedName(), {}, {embed_scale});

  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const bool local = local_rope && spec.layer_window[i] > 0;
    const FoldedRope& r = local ? *local_rope : global_rope;
    LayerInputs in{pos, masks[layer_group[i]], k_caches[i], v_caches[i], r.inv_freq,
                   &spec.LayerRope(i), r.scaling};
    SLM_ASSIGN_OR_RETURN(x, BuildLayer(b, spec, i, T, x, in));
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
  if (spec.final_softcap > 0) {
    // Gemma 2: logits = cap * tanh(logits / cap), part of the model's forward pass.
    const int32_t raw = b.Tmp("logits.raw", {1, rows, spec.vocab_size});
    b.Emit(OpKind::kMatMul, {xn, head}, {raw}, spec.LmHeadName());
    b.Emit(OpKind::kSoftCap, {raw}, {out}, "final_logit_softcapping", {},
           {static_cast<float>(spec.final_softcap)});
  } else {
    b.Emit(OpKind::kMatMul, {xn, head}, {out}, spec.LmHeadName());
  }
  g.outputs.push_back(out);
  SLM_RETURN_IF_ERROR(g.Validate());
  return g;
}

}  // namespace slm::model
