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
  int32_t TmpI8(const std::string& name, Shape shape) {
    return g_.AddIntermediate(name, DType::kI8, std::move(shape));
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

Result<KvCacheDType> ParseKvCacheDType(const std::string& name) {
  if (name == "f32" || name == "float32") return KvCacheDType::kF32;
  if (name == "int8") return KvCacheDType::kInt8;
  return InvalidArgument("kv cache dtype '" + name + "' is not one of: f32, int8");
}

const char* KvCacheDTypeName(KvCacheDType t) { return t == KvCacheDType::kInt8 ? "int8" : "f32"; }

void DescribeCacheFormat(const CacheLayout& cache, io::ContractMetadata& meta) {
  meta.cache_extra_states.clear();
  if (cache.kv_dtype == KvCacheDType::kF32) {
    meta.cache_dtype = "float32";
    meta.cache_format.clear();  // absent = kv_f32_v1: readable by runners older than the field
    return;
  }
  meta.cache_dtype = "int8";
  meta.cache_format = io::kCacheFormatInt8;
  for (size_t i = 0; i < cache.layers.size(); ++i) {
    const io::CacheLayer& l = cache.layers[i];
    int64_t len = 0;
    for (const io::CacheGroup& g : cache.groups) {
      if (g.name == l.group) len = g.cache_len;
    }
    for (char kv : {'k', 'v'}) {
      meta.cache_extra_states.push_back({io::KvScaleStateName(kv, int64_t(i)),
                                         std::string(1, kv) + "_cache." + std::to_string(i), "float32",
                                         {1, l.n_kv_heads, len}});
    }
  }
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
  int64_t rope_switch_len;  // > 0: inv_freq is [2, rot/2] (longrope short; long), see kRope
  int32_t k_scale = -1, v_scale = -1;  // int8 caches only: [1, Hkv, L] f32 row scales
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
  std::vector<int64_t> q_ints = {Hq, hd, in.rope->rotary_dim}, k_ints = {Hkv, hd, in.rope->rotary_dim};
  if (in.rope_switch_len > 0) {
    q_ints.push_back(in.rope_switch_len);
    k_ints.push_back(in.rope_switch_len);
  }
  b.Emit(OpKind::kRope, {q, in.pos, in.inv_freq}, {q_rot}, P + ".self_attn.rotary_emb(q)", q_ints, rope_f);
  b.Emit(OpKind::kRope, {k, in.pos, in.inv_freq}, {k_rot}, P + ".self_attn.rotary_emb(k)", k_ints, rope_f);
  const int32_t attn = b.Tmp(L + ".attn", {T, Hq * hd});
  const std::vector<float> attn_f = {static_cast<float>(spec.attn_scale), static_cast<float>(spec.attn_softcap)};
  if (in.k_scale < 0) {
    b.Emit(OpKind::kAttention, {q_rot, k_rot, v, in.k_cache, in.v_cache, in.mask}, {attn}, P + ".self_attn", {Hq, Hkv, hd}, attn_f);
    b.Emit(OpKind::kKvCommit, {k_rot, v, in.pos, in.k_cache, in.v_cache}, {}, P + ".self_attn(cache commit)");
  } else {
    // Int8 caches: this call's rows are quantized once, then attended to and committed as int8,
    // so every path (chunked prefill, one-token decode) sees the same quantized keys and values.
    const int32_t kq = b.TmpI8(L + ".k_q8", {T, Hkv * hd}), ks = b.Tmp(L + ".k_q8_scale", {T, Hkv});
    const int32_t vq = b.TmpI8(L + ".v_q8", {T, Hkv * hd}), vs = b.Tmp(L + ".v_q8_scale", {T, Hkv});
    b.Emit(OpKind::kQuantizeKv, {k_rot}, {kq, ks}, P + ".self_attn(quantize k)", {Hkv, hd});
    b.Emit(OpKind::kQuantizeKv, {v}, {vq, vs}, P + ".self_attn(quantize v)", {Hkv, hd});
    b.Emit(OpKind::kAttentionQ8, {q_rot, kq, ks, vq, vs, in.k_cache, in.k_scale, in.v_cache, in.v_scale, in.mask}, {attn},
           P + ".self_attn", {Hq, Hkv, hd}, attn_f);
    b.Emit(OpKind::kKvCommitQ8, {kq, ks, vq, vs, in.pos, in.k_cache, in.k_scale, in.v_cache, in.v_scale}, {},
           P + ".self_attn(cache commit)");
  }
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
  // ParseModelSpec admits exactly these activations; GeGlu's attribute: 1 = exact erf GELU.
  if (spec.hidden_act == "silu") {
    b.Emit(OpKind::kSwiGlu, {gate, up}, {act}, P + ".mlp.act_fn");
  } else {
    b.Emit(OpKind::kGeGlu, {gate, up}, {act}, P + ".mlp.act_fn", {spec.hidden_act == "gelu" ? 1 : 0});
  }
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
  if (spec.hidden_act != "silu" && spec.hidden_act != "gelu_pytorch_tanh" && spec.hidden_act != "gelu") {
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
  std::vector<int32_t> k_caches, v_caches, k_scales, v_scales;
  std::vector<int64_t> layer_group;
  const bool q8 = cache.kv_dtype == KvCacheDType::kInt8;
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const io::CacheLayer& l = cache.layers[i];
    int64_t gi = -1;
    for (size_t j = 0; j < cache.groups.size(); ++j) {
      if (cache.groups[j].name == l.group) gi = static_cast<int64_t>(j);
    }
    if (gi < 0) return Internal("layer " + std::to_string(i) + ": unknown cache group " + l.group);
    layer_group.push_back(gi);
    const Shape cs = {1, l.n_kv_heads, cache.groups[gi].cache_len, l.head_dim};
    const DType cd = q8 ? DType::kI8 : DType::kF32;
    k_caches.push_back(g.AddInput("k_cache." + std::to_string(i), cd, cs, graph::ValueKind::kState));
    v_caches.push_back(g.AddInput("v_cache." + std::to_string(i), cd, cs, graph::ValueKind::kState));
    if (q8) {  // per (head, slot) row scales: extra states, declared in the metadata
      const Shape ss = {1, l.n_kv_heads, cache.groups[gi].cache_len};
      k_scales.push_back(g.AddInput(io::KvScaleStateName('k', i), DType::kF32, ss, graph::ValueKind::kState));
      v_scales.push_back(g.AddInput(io::KvScaleStateName('v', i), DType::kF32, ss, graph::ValueKind::kState));
    }
  }

  // Rope tables: folded at compile time from the config; identical in every method, so the
  // artifact stores each once. Sliding layers may have their own (Gemma 3).
  struct FoldedRope {
    int32_t inv_freq;
    float scaling;
    int64_t switch_len;
  };
  auto fold = [&](const RopeSpec& r, const std::string& name) {
    RopeTables t = ComputeRopeTables(r);
    const int64_t half = static_cast<int64_t>(t.inv_freq.size());
    if (t.switch_len > 0) {
      // longrope: rows [short; long], the kernel picks one per call (kRope in graph.h).
      std::vector<float> both = t.inv_freq;
      both.insert(both.end(), t.long_inv_freq.begin(), t.long_inv_freq.end());
      const int32_t id = g.AddConstant(
          name, DType::kF32, {2, half},
          graph::MakeF32Constant(both, name + " (short; long factors) folded from config.json"));
      return FoldedRope{id, t.attention_scaling, t.switch_len};
    }
    const int32_t id = g.AddConstant(
        name, DType::kF32, {half},
        graph::MakeF32Constant(t.inv_freq, name + " folded from config.json"));
    return FoldedRope{id, t.attention_scaling, 0};
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
                   &spec.LayerRope(i), r.scaling, r.switch_len};
    if (q8) {
      in.k_scale = k_scales[i];
      in.v_scale = v_scales[i];
    }
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
