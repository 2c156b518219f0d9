// The graph IR: one static-shape graph per method. Values have fixed dtypes and shapes;
// ops run in list order. Values are inputs (bound by the caller), outputs (bound by the
// caller, written by an op), states (bound by the caller, mutated in place: KV caches),
// constants (weights, stored once in the artifact) and intermediates (placed in the method's
// arena by the memory planner).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace slm::graph {

// Values are part of the artifact format: never renumber, only append.
enum class ValueKind : uint8_t {
  kInput = 0,
  kOutput = 1,
  kState = 2,
  kConstant = 3,
  kIntermediate = 4,
};
const char* ValueKindName(ValueKind k);

// Produces the bytes of a constant on demand, so weights are read lazily (from an mmapped
// checkpoint) one at a time while the artifact is written, never all at once.
class ConstantSource {
 public:
  virtual ~ConstantSource() = default;
  // Writes exactly `nbytes` (the value's CheckedByteSize) into `dst`.
  virtual Status Read(uint8_t* dst, uint64_t nbytes) const = 0;
  // Where the data comes from, for error messages and the debug record.
  virtual std::string Describe() const = 0;
};

// A constant computed at compile time (a folded table, a test tensor).
class OwnedConstant final : public ConstantSource {
 public:
  OwnedConstant(std::vector<uint8_t> bytes, std::string what)
      : bytes_(std::move(bytes)), what_(std::move(what)) {}
  Status Read(uint8_t* dst, uint64_t nbytes) const override;
  std::string Describe() const override { return what_; }

 private:
  std::vector<uint8_t> bytes_;
  std::string what_;
};
std::shared_ptr<const ConstantSource> MakeF32Constant(const std::vector<float>& values,
                                                      std::string what);

struct Value {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  ValueKind kind = ValueKind::kIntermediate;
  // kConstant only, before serialization: where the bytes come from.
  std::shared_ptr<const ConstantSource> source;
  // kConstant only, after constant lifting: index into the program's constant table.
  int32_t constant_index = -1;
  // kIntermediate only, after memory planning: byte offset in the method's arena.
  int64_t arena_offset = -1;
};

// Values are part of the artifact format: never renumber, only append.
// Shapes: T = rows of this call (the method's step, or 1 after kGatherRow), D = hidden size.
enum class OpKind : uint16_t {
  // in: ids [1,T] i32, table [V,D]          out: [T,D]
  //   floats[0] = multiplier applied to the rows (1 for Llama; √D for Gemma)
  kEmbedding = 0,
  // in: x [R,D], w [D]                      out: [R,D]
  //   floats[0] = eps; ints[0] = 1 when the weight is applied as (1 + w) (Gemma)
  //   x may also be [T, H*D] (last dim a multiple of D): every D-long chunk is normalized on
  //   its own, i.e. a per-head norm over head_dim (Qwen3 / Gemma 3 q_norm, k_norm).
  kRmsNorm = 1,
  // in: x [R,K], w [N,K] (HF layout), optional bias [N]   out: [R,N] = x·wᵀ (+ bias)
  kMatMul = 2,
  // in: x [T, H*hd], pos [1,T] i32, inv_freq [rot/2]       out: [T, H*hd]
  //   ints = {n_heads, head_dim, rotary_dim}; floats = {attention_scaling}
  //   rotate_half convention (HF): pairs (i, i + rot/2) within the first `rot` dims.
  //   Rows with pos < 0 (padding) are passed through unchanged.
  //   Longrope: ints = {n_heads, head_dim, rotary_dim, switch_len} and inv_freq [2, rot/2]
  //   (short-factor row, long-factor row); the whole call uses the long row iff its largest
  //   valid position p has p + 1 > switch_len (HF's per-forward longrope_frequency_update).
  kRope = 3,
  // in: q [T, Hq*hd], k [T, Hkv*hd], v [T, Hkv*hd], k_cache [1,Hkv,L,hd], v_cache [1,Hkv,L,hd],
  //     mask [1, T, L+T]                    out: [T, Hq*hd]
  //   ints = {n_heads, n_kv_heads, head_dim}; floats = {scale, softcap (0 = none)}
  //   Row t attends over [cache slots ; this call's rows] with the additive mask.
  kAttention = 4,
  // in: k [T, Hkv*hd], v [T, Hkv*hd], pos [1,T] i32, k_cache, v_cache   out: none
  //   Writes valid rows (pos ≥ 0), ascending t, into slot pos mod L. Mutates the states.
  kKvCommit = 5,
  // in: a, b (same shape)                   out: a + b
  kAdd = 6,
  // in: gate, up (same shape)               out: silu(gate) * up
  kSwiGlu = 7,
  // in: x [T,D], row [1] i32                out: [1,D] = x[row]
  kGatherRow = 8,
  // in: gate, up (same shape)               out: gelu(gate) * up (Gemma's GeGLU MLP)
  //   ints = {} or {exact}: 0 / absent (artifacts before the attribute) = torch
  //   gelu(approximate='tanh'); 1 = exact erf GELU, torch gelu(approximate='none')
  kGeGlu = 9,
  // in: x (any shape)                       out: same shape, cap * tanh(x / cap)
  //   floats[0] = cap > 0 (Gemma 2 final logit soft-capping)
  kSoftCap = 10,
  // in: x [R,K] f32, w (int8 [N,K] | uint8 [N,K/2] packed int4), scales f32 ([N] | [N,K/G]),
  //     [offsets f32 [N,K/G] when ints[2]], [bias f32 [N]]          out: [R,N] = x·dequant(w)ᵀ (+ b)
  //   ints = {bits (8 | 4), group G (int4; 0 for int8 per output channel), has_offsets
  //   (asymmetric int4), dynamic (1: x is quantized per row to int8 on the fly, 8da8w / 8da4w)}.
  //   Layouts and numerics: kernels/quant_kernels.h.
  kMatMulQ = 11,
  // in: ids [1,T] i32, table (int8 [V,D] | uint8 [V,D/2]), scales, [offsets]   out: [T,D]
  //   ints = {bits, group, has_offsets} as kMatMulQ; floats[0] = multiplier as kEmbedding.
  kEmbeddingQ = 12,
  // in: x (any shape)                       out: same dtype and shape, a copy of x
  //   Returns a state as a method output (state outputs, graph/state_outputs.h). When the
  //   runtime binds the output to the state's own buffer (an alias), nothing is copied.
  kCopy = 13,
  // Int8 KV caches (cache format kv_int8_tokenhead_v1; numerics in kernels/attention_q8.h).
  // in: x [T, H*hd] f32                     out: q [T, H*hd] i8, scales [T, H] f32
  //   ints = {H, hd}. Symmetric absmax/127 per (row, head) chunk.
  kQuantizeKv = 14,
  // in: q [T, Hq*hd] f32, k i8 [T, Hkv*hd], k_scale [T, Hkv], v i8, v_scale (this call's rows,
  //     from kQuantizeKv), k_cache i8 [1,Hkv,L,hd], k_cache_scale f32 [1,Hkv,L], v_cache,
  //     v_cache_scale, mask [1, T, L+T]      out: [T, Hq*hd]
  //   ints, floats as kAttention; every key/value row is read as int8 · its row scale.
  kAttentionQ8 = 15,
  // in: k i8, k_scale, v i8, v_scale, pos [1,T] i32, k_cache, k_cache_scale, v_cache,
  //     v_cache_scale (shapes as kAttentionQ8)   out: none
  //   kKvCommit for int8 rows: row t (pos ≥ 0) and its scales go to slot pos mod L.
  kKvCommitQ8 = 16,
};
const char* OpKindName(OpKind k);

struct Op {
  OpKind kind;
  std::vector<int32_t> inputs;   // value ids
  std::vector<int32_t> outputs;  // value ids
  std::vector<int64_t> ints;
  std::vector<float> floats;
  // Provenance for the debug record: "layers.3.self_attn.q_proj" etc.
  std::string debug;
};

struct Graph {
  std::string name;  // method name
  std::vector<Value> values;
  std::vector<Op> ops;
  std::vector<int32_t> inputs;   // ordered: the method's input signature (inputs and states)
  std::vector<int32_t> outputs;  // ordered: the method's output signature
  int64_t arena_bytes = 0;       // after memory planning

  int32_t AddValue(Value v);
  int32_t AddInput(std::string name, DType dtype, Shape shape, ValueKind kind = ValueKind::kInput);
  int32_t AddConstant(std::string name, DType dtype, Shape shape,
                      std::shared_ptr<const ConstantSource> source);
  int32_t AddIntermediate(std::string name, DType dtype, Shape shape);
  void AddOp(Op op) { ops.push_back(std::move(op)); }
  // Returns the id of the value named `name`, or -1.
  int32_t FindValue(const std::string& name) const;
  // Structural checks: ids in range, every intermediate produced before use and exactly once,
  // outputs produced, names unique, constants have sources or indices. Errors name the op.
  Status Validate() const;
};

}  // namespace slm::graph
