#include "runtime/op_checks.h"

#include <cmath>

namespace slm::runtime {
namespace {

using graph::Graph;
using graph::Op;
using graph::OpKind;
using graph::Value;

class OpChecker {
 public:
  OpChecker(const Graph& g, const Op& op, size_t index) : g_(g), op_(op) {
    where_ = "method '" + g.name + "' op " + std::to_string(index) + " (" +
             graph::OpKindName(op.kind) + (op.debug.empty() ? "" : ", " + op.debug) + ")";
  }

  Status Arity(size_t min_in, size_t max_in, size_t outs, size_t ints, size_t floats) const {
    if (op_.inputs.size() < min_in || op_.inputs.size() > max_in) {
      return Fail("has " + std::to_string(op_.inputs.size()) + " inputs, expected " +
                  std::to_string(min_in) + (max_in != min_in ? "-" + std::to_string(max_in) : ""));
    }
    if (op_.outputs.size() != outs) return Fail("has " + std::to_string(op_.outputs.size()) + " outputs, expected " + std::to_string(outs));
    if (op_.ints.size() != ints) return Fail("has " + std::to_string(op_.ints.size()) + " int attributes, expected " + std::to_string(ints));
    if (op_.floats.size() != floats) return Fail("has " + std::to_string(op_.floats.size()) + " float attributes, expected " + std::to_string(floats));
    return Status::Ok();
  }
  const Value& In(size_t i) const { return g_.values[op_.inputs[i]]; }
  const Value& Out(size_t i) const { return g_.values[op_.outputs[i]]; }
  int64_t Numel(const Value& v) const {
    auto n = CheckedNumElements(v.shape);
    return n.ok() ? *n : -1;
  }
  int64_t Last(const Value& v) const { return v.shape.empty() ? 1 : v.shape.back(); }
  Status DType(const Value& v, slm::DType t) const {
    if (v.dtype != t) return Fail("'" + v.name + "' has dtype " + DTypeName(v.dtype) + ", expected " + DTypeName(t));
    return Status::Ok();
  }
  Status Numel(const Value& v, int64_t n) const {
    if (Numel(v) != n) {
      return Fail("'" + v.name + "' has shape " + ShapeToString(v.shape) + " (" +
                  std::to_string(Numel(v)) + " elements), expected " + std::to_string(n));
    }
    return Status::Ok();
  }
  Status Positive(std::initializer_list<int64_t> xs) const {
    for (int64_t x : xs) if (x <= 0) return Fail("has a non-positive size attribute");
    return Status::Ok();
  }
  Status Fail(const std::string& what) const { return InvalidArgument(where_ + ": " + what); }

 private:
  const Graph& g_;
  const Op& op_;
  std::string where_;
};

// Index of the op's int32 input (ids / positions / row), or -1: every other tensor an op
// touches is float32 in this version.
int IntInputIndex(OpKind kind) {
  switch (kind) {
    case OpKind::kEmbedding: return 0;
    case OpKind::kRope: return 1;
    case OpKind::kKvCommit: return 2;
    case OpKind::kGatherRow: return 1;
    default: return -1;
  }
}

// kMatMulQ / kEmbeddingQ: quantized weight (int8 [N,K] or packed int4 uint8 [N,K/2]) plus
// f32 scales (and offsets); layouts in kernels/quant_kernels.h.
Status CheckQuantOp(const OpChecker& c, const Op& op) {
  using slm::DType;
  const bool matmul = op.kind == OpKind::kMatMulQ;
  SLM_RETURN_IF_ERROR(c.Arity(3, 5, 1, matmul ? 4 : 3, matmul ? 0 : 1));
  const int64_t bits = op.ints[0], group = op.ints[1], has_off = op.ints[2];
  if (has_off != 0 && has_off != 1) return c.Fail("has_offsets must be 0 or 1");
  if (matmul && op.ints[3] != 0 && op.ints[3] != 1) return c.Fail("dynamic must be 0 or 1");
  const size_t first_extra = 3 + size_t(has_off);
  if (op.inputs.size() < first_extra || op.inputs.size() > first_extra + (matmul ? 1 : 0)) {
    return c.Fail("has " + std::to_string(op.inputs.size()) + " inputs, expected " + std::to_string(first_extra) +
                  (matmul ? " or " + std::to_string(first_extra + 1) + " (with bias)" : ""));
  }
  SLM_RETURN_IF_ERROR(c.DType(c.In(0), matmul ? DType::kF32 : DType::kI32));
  SLM_RETURN_IF_ERROR(c.DType(c.Out(0), DType::kF32));
  for (size_t i = 2; i < op.inputs.size(); ++i) SLM_RETURN_IF_ERROR(c.DType(c.In(i), DType::kF32));
  const graph::Value& w = c.In(1);
  if (w.shape.size() != 2) return c.Fail("weight '" + w.name + "' must be 2-D");
  const int64_t n = w.shape[0];
  int64_t k = 0;
  if (bits == 8) {
    SLM_RETURN_IF_ERROR(c.DType(w, DType::kI8));
    if (group != 0 || has_off) return c.Fail("int8 weights are per output channel: group must be 0, no offsets");
    k = w.shape[1];
    SLM_RETURN_IF_ERROR(c.Positive({n, k}));
    SLM_RETURN_IF_ERROR(c.Numel(c.In(2), n));
  } else if (bits == 4) {
    SLM_RETURN_IF_ERROR(c.DType(w, DType::kU8));
    k = w.shape[1] * 2;
    SLM_RETURN_IF_ERROR(c.Positive({n, k}));
    if (group <= 0 || group % 32 != 0 || k % group != 0) {
      return c.Fail("int4 group " + std::to_string(group) + " must be a positive multiple of 32 dividing K " + std::to_string(k));
    }
    SLM_RETURN_IF_ERROR(c.Numel(c.In(2), n * (k / group)));
    if (has_off) SLM_RETURN_IF_ERROR(c.Numel(c.In(3), n * (k / group)));
  } else {
    return c.Fail("bits must be 8 or 4, found " + std::to_string(bits));
  }
  if (!matmul) return c.Numel(c.Out(0), c.Numel(c.In(0)) * k);
  if (c.Last(c.In(0)) != k) return c.Fail("x's last dim " + std::to_string(c.Last(c.In(0))) + " != K " + std::to_string(k));
  if (op.inputs.size() == first_extra + 1) SLM_RETURN_IF_ERROR(c.Numel(c.In(first_extra), n));
  if (c.Last(c.Out(0)) != n) return c.Fail("output's last dim != N");
  return c.Numel(c.Out(0), c.Numel(c.In(0)) / k * n);
}

// kQuantizeKv / kAttentionQ8 / kKvCommitQ8: int8 KV caches (graph.h; kernels/attention_q8.h).
// Every geometry the kernels rely on is checked here, once, at load.
Status CheckKvQ8Op(const OpChecker& c, const Op& op) {
  using slm::DType;
  if (op.kind == OpKind::kQuantizeKv) {
    SLM_RETURN_IF_ERROR(c.Arity(1, 1, 2, 2, 0));
    const int64_t h = op.ints[0], hd = op.ints[1];
    SLM_RETURN_IF_ERROR(c.Positive({h, hd}));
    SLM_RETURN_IF_ERROR(c.DType(c.In(0), DType::kF32));
    SLM_RETURN_IF_ERROR(c.DType(c.Out(0), DType::kI8));
    SLM_RETURN_IF_ERROR(c.DType(c.Out(1), DType::kF32));
    const int64_t n = c.Numel(c.In(0));
    if (n < 0 || n % (h * hd) != 0) return c.Fail("x's size is not a multiple of H*hd = " + std::to_string(h * hd));
    SLM_RETURN_IF_ERROR(c.Numel(c.Out(0), n));
    return c.Numel(c.Out(1), n / hd);
  }
  const bool attn = op.kind == OpKind::kAttentionQ8;
  // Attention: q first, mask last; commit: pos between the new rows and the caches.
  const size_t rows0 = attn ? 1 : 0, cache0 = 5;
  SLM_RETURN_IF_ERROR(attn ? c.Arity(10, 10, 1, 3, 2) : c.Arity(9, 9, 0, 0, 0));
  const Value& kc = c.In(cache0);
  if (kc.shape.size() != 4 || kc.shape[0] != 1) return c.Fail("k_cache '" + kc.name + "' must be [1, Hkv, L, hd], found " + ShapeToString(kc.shape));
  const int64_t hkv = kc.shape[1], L = kc.shape[2], hd = kc.shape[3];
  SLM_RETURN_IF_ERROR(c.Positive({hkv, L, hd}));
  const Shape scale_shape = {1, hkv, L};
  for (size_t i : {cache0, cache0 + 2}) {
    SLM_RETURN_IF_ERROR(c.DType(c.In(i), DType::kI8));
    if (c.In(i).shape != kc.shape) return c.Fail("cache '" + c.In(i).name + "' has shape " + ShapeToString(c.In(i).shape) + ", expected " + ShapeToString(kc.shape));
    SLM_RETURN_IF_ERROR(c.DType(c.In(i + 1), DType::kF32));
    if (c.In(i + 1).shape != scale_shape) {
      return c.Fail("cache scales '" + c.In(i + 1).name + "' have shape " + ShapeToString(c.In(i + 1).shape) + ", expected " + ShapeToString(scale_shape));
    }
  }
  if (!attn) {
    for (size_t i = cache0; i < cache0 + 4; ++i) {
      if (c.In(i).kind != graph::ValueKind::kState) return c.Fail("'" + c.In(i).name + "' must be a state");
    }
    SLM_RETURN_IF_ERROR(c.DType(c.In(4), DType::kI32));
  }
  const int64_t t = attn ? c.Numel(c.In(0)) / std::max<int64_t>(1, op.ints[0] * op.ints[2]) : c.Numel(c.In(4));
  for (size_t i : {rows0, rows0 + 2}) {
    SLM_RETURN_IF_ERROR(c.DType(c.In(i), DType::kI8));
    SLM_RETURN_IF_ERROR(c.Numel(c.In(i), t * hkv * hd));
    SLM_RETURN_IF_ERROR(c.DType(c.In(i + 1), DType::kF32));
    SLM_RETURN_IF_ERROR(c.Numel(c.In(i + 1), t * hkv));
  }
  if (!attn) return Status::Ok();
  const int64_t hq = op.ints[0];
  SLM_RETURN_IF_ERROR(c.Positive({hq, op.ints[1], op.ints[2]}));
  if (op.ints[1] != hkv || op.ints[2] != hd) return c.Fail("n_kv_heads / head_dim attributes differ from the cache geometry");
  if (hq % hkv) return c.Fail("n_heads must be a multiple of n_kv_heads");
  SLM_RETURN_IF_ERROR(c.DType(c.In(0), DType::kF32));
  SLM_RETURN_IF_ERROR(c.Numel(c.In(0), t * hq * hd));
  SLM_RETURN_IF_ERROR(c.DType(c.In(9), DType::kF32));
  SLM_RETURN_IF_ERROR(c.Numel(c.In(9), t * (L + t)));
  SLM_RETURN_IF_ERROR(c.DType(c.Out(0), DType::kF32));
  return c.Numel(c.Out(0), t * hq * hd);
}

Status CheckOp(const Graph& g, const Op& op, size_t index) {
  OpChecker c(g, op, index);
  if (op.kind == OpKind::kMatMulQ || op.kind == OpKind::kEmbeddingQ) return CheckQuantOp(c, op);
  if (op.kind == OpKind::kQuantizeKv || op.kind == OpKind::kAttentionQ8 || op.kind == OpKind::kKvCommitQ8) {
    return CheckKvQ8Op(c, op);
  }
  if (op.kind == OpKind::kCopy) {
    // Copies a state of any dtype (int8 caches and their f32 scales included), byte for byte.
    SLM_RETURN_IF_ERROR(c.Arity(1, 1, 1, 0, 0));
    if (c.In(0).shape != c.Out(0).shape) return c.Fail("output shape differs from the input's");
    return c.DType(c.Out(0), c.In(0).dtype);
  }
  using slm::DType;
  const int int_input = IntInputIndex(op.kind);
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    SLM_RETURN_IF_ERROR(c.DType(c.In(i), static_cast<int>(i) == int_input ? DType::kI32 : DType::kF32));
  }
  for (size_t i = 0; i < op.outputs.size(); ++i) SLM_RETURN_IF_ERROR(c.DType(c.Out(i), DType::kF32));
  switch (op.kind) {
    case OpKind::kEmbedding: {
      SLM_RETURN_IF_ERROR(c.Arity(2, 2, 1, 0, 1));
      SLM_RETURN_IF_ERROR(c.DType(c.In(0), DType::kI32));
      SLM_RETURN_IF_ERROR(c.DType(c.In(1), DType::kF32));
      SLM_RETURN_IF_ERROR(c.DType(c.Out(0), DType::kF32));
      if (c.In(1).shape.size() != 2) return c.Fail("table must be [V, D]");
      return c.Numel(c.Out(0), c.Numel(c.In(0)) * c.In(1).shape[1]);
    }
    case OpKind::kRmsNorm: {
      SLM_RETURN_IF_ERROR(c.Arity(2, 2, 1, 1, 1));
      for (const auto* v : {&c.In(0), &c.In(1), &c.Out(0)}) SLM_RETURN_IF_ERROR(c.DType(*v, DType::kF32));
      const int64_t d = c.Numel(c.In(1));
      // Per-head norms pass x as [T, H*d]: every d-long chunk of a row is normalized.
      if (d <= 0 || c.Last(c.In(0)) % d != 0) return c.Fail("weight size does not divide the last dim of x");
      return c.Numel(c.Out(0), c.Numel(c.In(0)));
    }
    case OpKind::kMatMul: {
      SLM_RETURN_IF_ERROR(c.Arity(2, 3, 1, 0, 0));
      for (size_t i = 0; i < op.inputs.size(); ++i) SLM_RETURN_IF_ERROR(c.DType(c.In(i), DType::kF32));
      SLM_RETURN_IF_ERROR(c.DType(c.Out(0), DType::kF32));
      const Value& w = c.In(1);
      if (w.shape.size() != 2) return c.Fail("weight '" + w.name + "' must be [N, K]");
      const int64_t n = w.shape[0], k = w.shape[1];
      SLM_RETURN_IF_ERROR(c.Positive({n, k}));
      if (c.Last(c.In(0)) != k) return c.Fail("x's last dim " + std::to_string(c.Last(c.In(0))) + " != K " + std::to_string(k));
      if (op.inputs.size() == 3) SLM_RETURN_IF_ERROR(c.Numel(c.In(2), n));
      if (c.Last(c.Out(0)) != n) return c.Fail("output's last dim != N");
      return c.Numel(c.Out(0), c.Numel(c.In(0)) / k * n);
    }
    case OpKind::kRope: {
      // 4 ints: longrope with two tables and the switch length (graph.h).
      const bool two_tables = op.ints.size() == 4;
      SLM_RETURN_IF_ERROR(c.Arity(3, 3, 1, two_tables ? 4 : 3, 1));
      const int64_t h = op.ints[0], hd = op.ints[1], rot = op.ints[2];
      SLM_RETURN_IF_ERROR(c.Positive({h, hd, rot}));
      if (two_tables) SLM_RETURN_IF_ERROR(c.Positive({op.ints[3]}));
      if (rot > hd || rot % 2) return c.Fail("rotary_dim must be even and <= head_dim");
      SLM_RETURN_IF_ERROR(c.DType(c.In(1), DType::kI32));
      const int64_t t = c.Numel(c.In(1));
      SLM_RETURN_IF_ERROR(c.Numel(c.In(0), t * h * hd));
      SLM_RETURN_IF_ERROR(c.Numel(c.In(2), (two_tables ? 2 : 1) * (rot / 2)));
      return c.Numel(c.Out(0), t * h * hd);
    }
    case OpKind::kAttention: {
      SLM_RETURN_IF_ERROR(c.Arity(6, 6, 1, 3, 2));
      const int64_t hq = op.ints[0], hkv = op.ints[1], hd = op.ints[2];
      SLM_RETURN_IF_ERROR(c.Positive({hq, hkv, hd}));
      if (hq % hkv) return c.Fail("n_heads must be a multiple of n_kv_heads");
      const Value& kc = c.In(3);
      if (kc.shape.size() != 4 || kc.shape[1] != hkv || kc.shape[3] != hd) return c.Fail("k_cache must be [1, Hkv, L, hd]");
      if (c.In(4).shape != kc.shape) return c.Fail("v_cache shape differs from k_cache");
      const int64_t L = kc.shape[2];
      const int64_t t = c.Numel(c.In(0)) / (hq * hd);
      SLM_RETURN_IF_ERROR(c.Numel(c.In(0), t * hq * hd));
      SLM_RETURN_IF_ERROR(c.Numel(c.In(1), t * hkv * hd));
      SLM_RETURN_IF_ERROR(c.Numel(c.In(2), t * hkv * hd));
      SLM_RETURN_IF_ERROR(c.Numel(c.In(5), t * (L + t)));
      return c.Numel(c.Out(0), t * hq * hd);
    }
    case OpKind::kKvCommit: {
      SLM_RETURN_IF_ERROR(c.Arity(5, 5, 0, 0, 0));
      const Value& kc = c.In(3);
      if (kc.kind != graph::ValueKind::kState || c.In(4).kind != graph::ValueKind::kState) return c.Fail("caches must be states");
      if (kc.shape.size() != 4 || c.In(4).shape != kc.shape) return c.Fail("caches must be [1, Hkv, L, hd] and equal");
      if (kc.shape[2] <= 0) return c.Fail("cache length must be positive");
      SLM_RETURN_IF_ERROR(c.DType(c.In(2), DType::kI32));
      const int64_t t = c.Numel(c.In(2));
      SLM_RETURN_IF_ERROR(c.Numel(c.In(0), t * kc.shape[1] * kc.shape[3]));
      return c.Numel(c.In(1), t * kc.shape[1] * kc.shape[3]);
    }
    case OpKind::kAdd:
    case OpKind::kSwiGlu:
    case OpKind::kGeGlu: {
      // GeGlu's optional approximation attribute (graph.h): none, or {0 | 1}.
      const bool glu_attr = op.kind == OpKind::kGeGlu && op.ints.size() == 1;
      SLM_RETURN_IF_ERROR(c.Arity(2, 2, 1, glu_attr ? 1 : 0, 0));
      if (glu_attr && op.ints[0] != 0 && op.ints[0] != 1) {
        return c.Fail("approximation attribute is " + std::to_string(op.ints[0]) + ", expected 0 (tanh) or 1 (exact erf)");
      }
      const int64_t n = c.Numel(c.In(0));
      SLM_RETURN_IF_ERROR(c.Numel(c.In(1), n));
      return c.Numel(c.Out(0), n);
    }
    case OpKind::kSoftCap: {
      SLM_RETURN_IF_ERROR(c.Arity(1, 1, 1, 0, 1));
      if (!(op.floats[0] > 0) || !std::isfinite(op.floats[0])) return c.Fail("cap must be a positive number");
      return c.Numel(c.Out(0), c.Numel(c.In(0)));
    }
    case OpKind::kMatMulQ:
    case OpKind::kEmbeddingQ:
      return CheckQuantOp(c, op);
    case OpKind::kQuantizeKv:
    case OpKind::kAttentionQ8:
    case OpKind::kKvCommitQ8:
      return CheckKvQ8Op(c, op);
    case OpKind::kCopy: {
      SLM_RETURN_IF_ERROR(c.Arity(1, 1, 1, 0, 0));
      if (c.In(0).shape != c.Out(0).shape) return c.Fail("output shape differs from the input's");
      return Status::Ok();
    }
    case OpKind::kGatherRow: {
      SLM_RETURN_IF_ERROR(c.Arity(2, 2, 1, 0, 0));
      SLM_RETURN_IF_ERROR(c.DType(c.In(1), DType::kI32));
      SLM_RETURN_IF_ERROR(c.Numel(c.In(1), 1));
      return c.Numel(c.Out(0), c.Last(c.In(0)));
    }
  }
  return c.Fail("unknown op kind");
}

}  // namespace

Status CheckOpShapes(const Graph& g) {
  for (size_t i = 0; i < g.ops.size(); ++i) SLM_RETURN_IF_ERROR(CheckOp(g, g.ops[i], i));
  return Status::Ok();
}

}  // namespace slm::runtime
