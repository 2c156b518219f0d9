#include "runtime/program.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/memory_limit.h"
#include "core/thread_pool.h"
#include "kernels/attention_q8.h"
#include "kernels/kernels.h"
#include "kernels/quant_kernels.h"
#include "runtime/op_checks.h"

namespace slm::runtime {

using graph::OpKind;
using graph::ValueKind;

Result<std::shared_ptr<Program>> Program::Load(const std::string& path) {
  SLM_ASSIGN_OR_RETURN(auto artifact, io::ArtifactFile::Open(path));
  auto program = std::shared_ptr<Program>(new Program());
  program->artifact_ = std::move(artifact);
  return program;
}

Result<std::unique_ptr<Method>> Program::LoadMethod(const std::string& name, Allocator& alloc) const {
  SLM_ASSIGN_OR_RETURN(graph::Graph g, artifact_->LoadMethod(name));
  std::unique_ptr<Method> m(new Method());
  SLM_RETURN_IF_ERROR(m->Prepare(artifact_, std::move(g), alloc));
  return m;
}

Status Method::Prepare(std::shared_ptr<const io::ArtifactFile> artifact, graph::Graph g,
                       Allocator& alloc) {
  artifact_ = std::move(artifact);
  graph_ = std::move(g);
  const std::string where = artifact_->path() + ": method '" + graph_.name + "'";
  SLM_RETURN_IF_ERROR(CheckOpShapes(graph_));
  if (graph_.arena_bytes < 0) return InvalidArgument(where + ": negative arena size");

  // The arena size comes from the file: refuse what the memory limit cannot hold before
  // allocating (core/memory_limit.h).
  SLM_RETURN_IF_ERROR(CheckMemoryNeed(static_cast<uint64_t>(graph_.arena_bytes), where + ": arena"));
  value_ptrs_.assign(graph_.values.size(), nullptr);
  arena_ = Buffer::Allocate(static_cast<size_t>(graph_.arena_bytes), alloc);
  const auto& constants = artifact_->constants();
  for (size_t i = 0; i < graph_.values.size(); ++i) {
    const graph::Value& v = graph_.values[i];
    if (v.kind == ValueKind::kConstant) {
      if (v.constant_index < 0 || static_cast<size_t>(v.constant_index) >= constants.size()) {
        return InvalidArgument(where + ": value '" + v.name + "' has no constant");
      }
      value_ptrs_[i] = const_cast<uint8_t*>(constants[v.constant_index].data);
    } else if (v.kind == ValueKind::kIntermediate) {
      value_ptrs_[i] = arena_.data() + v.arena_offset;  // bounds checked by the reader
    }
  }
  for (int32_t id : graph_.inputs) {
    const graph::Value& v = graph_.values[id];
    inputs_.push_back({v.name, v.dtype, v.shape, v.kind, *CheckedByteSize(v.dtype, v.shape)});
  }
  for (int32_t id : graph_.outputs) {
    const graph::Value& v = graph_.values[id];
    outputs_.push_back({v.name, v.dtype, v.shape, v.kind, *CheckedByteSize(v.dtype, v.shape)});
  }
  // Attention scratch (kernels::AttentionScratchFloats: score rows, runs, and for prefill-sized
  // calls one kv head's keys transposed), for the largest op.
  int64_t scratch_floats = 0;
  for (const graph::Op& op : graph_.ops) {
    if (op.kind != OpKind::kAttention && op.kind != OpKind::kAttentionQ8) continue;
    const int64_t L = graph_.values[op.inputs[op.kind == OpKind::kAttention ? 3 : 5]].shape[2];
    const int64_t T = *CheckedNumElements(graph_.values[op.inputs[0]].shape) / (op.ints[0] * op.ints[2]);
    scratch_floats = std::max(scratch_floats, kernels::AttentionScratchFloats(L, T, op.ints[0], op.ints[1], op.ints[2]));
  }
  // Dynamic quantized matmuls: xq [R*K] int8, xs [R] f32, group sums [R*K/G] i32 (64-aligned).
  int64_t q_rows = 0, q_xq = 0, q_gs = 0;
  for (const graph::Op& op : graph_.ops) {
    if (op.kind != OpKind::kMatMulQ || op.ints[3] == 0) continue;
    const graph::Value& w = graph_.values[op.inputs[1]];
    const int64_t k = op.ints[0] == 8 ? w.shape[1] : w.shape[1] * 2;
    const int64_t r = *CheckedNumElements(graph_.values[op.inputs[0]].shape) / k;
    q_rows = std::max(q_rows, r);
    q_xq = std::max(q_xq, r * k);
    q_gs = std::max(q_gs, op.ints[0] == 4 ? r * (k / op.ints[1]) : 0);
  }
  auto align64 = [](int64_t b) { return (b + 63) / 64 * 64; };
  quant_xs_offset_ = align64(q_xq);
  quant_gs_offset_ = quant_xs_offset_ + align64(q_rows * 4);
  quant_scratch_ = Buffer::Allocate(static_cast<size_t>(quant_gs_offset_ + q_gs * 4), alloc);
  // One slot per pool thread so attention heads can be split; 16-float aligned slots.
  scratch_slots_ = ThreadPool::Default().size();
  scratch_slot_floats_ = (scratch_floats + 15) / 16 * 16;
  uint64_t scratch_bytes = UINT64_MAX;  // L + T come from the file: overflow-checked
  (void)__builtin_mul_overflow(static_cast<uint64_t>(scratch_slot_floats_),
                               static_cast<uint64_t>(scratch_slots_) * sizeof(float), &scratch_bytes);
  SLM_RETURN_IF_ERROR(CheckMemoryNeed(scratch_bytes, where + ": attention scratch"));
  scratch_ = Buffer::Allocate(static_cast<size_t>(scratch_bytes), alloc);
  return Status::Ok();
}

const TensorSpec* Method::FindInput(const std::string& n) const {
  for (const TensorSpec& s : inputs_) if (s.name == n) return &s;
  return nullptr;
}

const TensorSpec* Method::FindOutput(const std::string& n) const {
  for (const TensorSpec& s : outputs_) if (s.name == n) return &s;
  return nullptr;
}

Status Method::Bind(const std::vector<TensorSpec>& specs, const std::string& what,
                    const std::string& n, void* data, uint64_t nbytes) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name != n) continue;
    if (nbytes != specs[i].nbytes) {
      return InvalidArgument("method '" + name() + "': " + what + " '" + n + "' needs " +
                             std::to_string(specs[i].nbytes) + " bytes (" + DTypeName(specs[i].dtype) +
                             " " + ShapeToString(specs[i].shape) + "), got " + std::to_string(nbytes));
    }
    if (data == nullptr && nbytes != 0) return InvalidArgument("method '" + name() + "': null buffer for " + n);
    const int32_t id = (&specs == &inputs_ ? graph_.inputs : graph_.outputs)[i];
    value_ptrs_[id] = static_cast<uint8_t*>(data);
    return Status::Ok();
  }
  return NotFound("method '" + name() + "' has no " + what + " named '" + n + "'");
}

Status Method::BindInput(const std::string& n, void* data, uint64_t nbytes) {
  return Bind(inputs_, "input", n, data, nbytes);
}

Status Method::BindOutput(const std::string& n, void* data, uint64_t nbytes) {
  return Bind(outputs_, "output", n, data, nbytes);
}

namespace {
thread_local OpObserver* t_op_observer = nullptr;
int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

ScopedOpObserver::ScopedOpObserver(OpObserver* observer) : previous_(t_op_observer) {
  t_op_observer = observer;
}
ScopedOpObserver::~ScopedOpObserver() { t_op_observer = previous_; }

Status Method::Execute() {
  OpObserver* const observer = t_op_observer;
  int64_t op_start_ns = observer != nullptr ? SteadyNowNs() : 0;
  size_t op_index = 0;
  for (size_t i = 0; i < graph_.inputs.size(); ++i) {
    if (value_ptrs_[graph_.inputs[i]] == nullptr) return FailedPrecondition("method '" + name() + "': input '" + inputs_[i].name + "' is not bound");
  }
  for (size_t i = 0; i < graph_.outputs.size(); ++i) {
    if (value_ptrs_[graph_.outputs[i]] == nullptr) return FailedPrecondition("method '" + name() + "': output '" + outputs_[i].name + "' is not bound");
  }
  auto f32 = [&](int32_t id) { return reinterpret_cast<float*>(value_ptrs_[id]); };
  auto i32 = [&](int32_t id) { return reinterpret_cast<const int32_t*>(value_ptrs_[id]); };
  auto i8 = [&](int32_t id) { return reinterpret_cast<int8_t*>(value_ptrs_[id]); };
  auto numel = [&](int32_t id) { return *CheckedNumElements(graph_.values[id].shape); };
  auto shape = [&](int32_t id) -> const Shape& { return graph_.values[id].shape; };
  ThreadPool& pool = ThreadPool::Default();
  // Below this many multiply-adds a product is not worth waking the workers for.
  constexpr int64_t kMinParallelMacs = int64_t{1} << 16;
  // Elementwise and row-wise ops (prefill-sized: a 128-token chunk's SwiGLU is 1M elements) are
  // split over the pool from this many elements. Pieces start at multiples of 64 elements or at
  // row boundaries, so every element is computed by the same vector code as in one piece: the
  // results do not depend on the thread count.
  constexpr int64_t kMinParallelElements = int64_t{1} << 15;
  auto elementwise = [&](int64_t n, auto&& fn) {  // fn(begin, end) over [0, n)
    if (n < kMinParallelElements || pool.size() == 1) fn(int64_t{0}, n);
    else pool.ParallelFor(n, 64, fn);
  };
  auto row_wise = [&](int64_t rows, int64_t row_elements, auto&& fn) {  // fn(row_begin, row_end)
    if (rows < 2 || rows * row_elements < kMinParallelElements || pool.size() == 1) fn(int64_t{0}, rows);
    else pool.ParallelFor(rows, 1, fn);
  };

  for (const graph::Op& op : graph_.ops) {
    const auto& in = op.inputs;
    const auto& out = op.outputs;
    switch (op.kind) {
      case OpKind::kEmbedding: {
        const Shape& table = shape(in[1]);
        if (!kernels::Embedding(i32(in[0]), f32(in[1]), f32(out[0]), numel(in[0]), table[0], table[1], op.floats[0])) {
          return OutOfRange("method '" + name() + "': input_ids holds a token id outside [0, " + std::to_string(table[0]) + ")");
        }
        break;
      }
      case OpKind::kRmsNorm: {
        const int64_t d = numel(in[1]);
        row_wise(numel(in[0]) / d, d, [&](int64_t rb, int64_t re) {
          kernels::RmsNorm(f32(in[0]) + rb * d, f32(in[1]), f32(out[0]) + rb * d, re - rb, d, op.floats[0], op.ints[0] != 0);
        });
        break;
      }
      case OpKind::kMatMul: {
        const int64_t n = shape(in[1])[0], k = shape(in[1])[1];
        const int64_t r = numel(in[0]) / k;
        const float *x = f32(in[0]), *w = f32(in[1]), *b = in.size() == 3 ? f32(in[2]) : nullptr;
        float* y = f32(out[0]);
        if (r * k * n < kMinParallelMacs || pool.size() == 1) {
          kernels::MatMulF32(x, w, b, y, r, k, n);
        } else {  // split the output columns: each thread streams its own slice of w once
          pool.ParallelFor(n, 8, [&](int64_t nb, int64_t ne) { kernels::MatMulF32Columns(x, w, b, y, r, k, n, nb, ne); });
        }
        break;
      }
      case OpKind::kMatMulQ: {
        const int64_t bits = op.ints[0], group = op.ints[1], has_off = op.ints[2];
        const Shape& ws = shape(in[1]);
        const int64_t n = ws[0], k = bits == 8 ? ws[1] : ws[1] * 2;
        const int64_t r = numel(in[0]) / k;
        const float* x = f32(in[0]);
        const uint8_t* w = value_ptrs_[in[1]];
        const float* sc = f32(in[2]);
        const float* off = has_off ? f32(in[3]) : nullptr;
        const float* b = in.size() == size_t(4 + has_off) ? f32(in[3 + has_off]) : nullptr;
        float* y = f32(out[0]);
        int8_t* xq = reinterpret_cast<int8_t*>(quant_scratch_.data());
        float* xs = reinterpret_cast<float*>(quant_scratch_.data() + quant_xs_offset_);
        int32_t* gs = reinterpret_cast<int32_t*>(quant_scratch_.data() + quant_gs_offset_);
        const bool dynamic = op.ints[3] != 0;
        if (dynamic) {
          const int64_t g = bits == 4 ? group : k;
          row_wise(r, k, [&](int64_t rb, int64_t re) {
            kernels::QuantizeRowsI8(x + rb * k, xq + rb * k, xs + rb, bits == 4 ? gs + rb * (k / g) : nullptr, re - rb, k, g);
          });
        }
        auto columns = [&](int64_t nb, int64_t ne) {
          const int8_t* w8 = reinterpret_cast<const int8_t*>(w);
          if (bits == 8 && dynamic) kernels::MatMulQ8DynColumns(xq, xs, w8, sc, b, y, r, k, n, nb, ne);
          else if (bits == 8) kernels::MatMulQ8Columns(x, w8, sc, b, y, r, k, n, nb, ne);
          else if (dynamic) kernels::MatMulQ4DynColumns(xq, xs, gs, w, sc, off, b, y, r, k, n, group, nb, ne);
          else kernels::MatMulQ4Columns(x, w, sc, off, b, y, r, k, n, group, nb, ne);
        };
        if (r * k * n < kMinParallelMacs || pool.size() == 1) columns(0, n);
        else pool.ParallelFor(n, 8, columns);
        break;
      }
      case OpKind::kEmbeddingQ: {
        const int64_t bits = op.ints[0], group = op.ints[1];
        const Shape& ws = shape(in[1]);
        const int64_t v = ws[0], d = bits == 8 ? ws[1] : ws[1] * 2;
        const int64_t t = numel(in[0]);
        const int32_t* ids = i32(in[0]);
        for (int64_t i = 0; i < t; ++i) {
          if (ids[i] < 0 || ids[i] >= v) {
            return OutOfRange("method '" + name() + "': input_ids holds a token id outside [0, " + std::to_string(v) + ")");
          }
        }
        for (int64_t i = 0; i < t; ++i) {
          if (bits == 8) {
            kernels::DequantizeRowQ8(reinterpret_cast<const int8_t*>(value_ptrs_[in[1]]), f32(in[2]), d, ids[i], op.floats[0], f32(out[0]) + i * d);
          } else {
            kernels::DequantizeRowQ4(value_ptrs_[in[1]], f32(in[2]), op.ints[2] ? f32(in[3]) : nullptr, d, group, ids[i], op.floats[0], f32(out[0]) + i * d);
          }
        }
        break;
      }
      case OpKind::kRope: {
        const int64_t t = numel(in[1]);
        const float* inv_freq = f32(in[2]);
        if (op.ints.size() == 4) inv_freq += kernels::RopeTableIndex(i32(in[1]), t, op.ints[3]) * (op.ints[2] / 2);
        const int64_t row = op.ints[0] * op.ints[1];  // n_heads · head_dim
        row_wise(t, row, [&](int64_t tb, int64_t te) {
          kernels::Rope(f32(in[0]) + tb * row, i32(in[1]) + tb, inv_freq, f32(out[0]) + tb * row, te - tb, op.ints[0],
                        op.ints[1], op.ints[2], op.floats[0]);
        });
        break;
      }
      case OpKind::kAttention: {
        const int64_t hq = op.ints[0], hkv = op.ints[1], hd = op.ints[2];
        const int64_t L = shape(in[3])[2];
        const int64_t t = numel(in[0]) / (hq * hd);
        if (pool.size() > scratch_slots_ || pool.size() == 1 || hq == 1) {
          kernels::Attention(f32(in[0]), f32(in[1]), f32(in[2]), f32(in[3]), f32(in[4]), f32(in[5]), f32(out[0]),
                             scratch_.as<float>(), t, L, hq, hkv, hd, op.floats[0], op.floats[1]);
        } else {  // split heads; each thread has its own score scratch
          pool.ParallelFor(hq, 1, [&](int64_t hb, int64_t he, int chunk) {
            kernels::AttentionHeads(f32(in[0]), f32(in[1]), f32(in[2]), f32(in[3]), f32(in[4]), f32(in[5]), f32(out[0]),
                                    scratch_.as<float>() + chunk * scratch_slot_floats_, t, L, hq, hkv, hd,
                                    op.floats[0], op.floats[1], hb, he);
          });
        }
        break;
      }
      case OpKind::kKvCommit: {
        const Shape& c = shape(in[3]);
        kernels::KvCommit(f32(in[0]), f32(in[1]), i32(in[2]), f32(in[3]), f32(in[4]), numel(in[2]), c[2], c[1], c[3]);
        break;
      }
      case OpKind::kAdd:
        elementwise(numel(in[0]), [&](int64_t b, int64_t e) { kernels::Add(f32(in[0]) + b, f32(in[1]) + b, f32(out[0]) + b, e - b); });
        break;
      case OpKind::kSwiGlu:
        elementwise(numel(in[0]), [&](int64_t b, int64_t e) { kernels::SwiGlu(f32(in[0]) + b, f32(in[1]) + b, f32(out[0]) + b, e - b); });
        break;
      case OpKind::kGeGlu: {
        const bool erf = !op.ints.empty() && op.ints[0] == 1;
        elementwise(numel(in[0]), [&](int64_t b, int64_t e) {
          if (erf) kernels::GeGluErf(f32(in[0]) + b, f32(in[1]) + b, f32(out[0]) + b, e - b);
          else kernels::GeGlu(f32(in[0]) + b, f32(in[1]) + b, f32(out[0]) + b, e - b);
        });
        break;
      }
      case OpKind::kSoftCap:
        if (out[0] != in[0]) std::copy_n(f32(in[0]), numel(in[0]), f32(out[0]));
        kernels::SoftCap(f32(out[0]), numel(out[0]), op.floats[0]);
        break;
      case OpKind::kCopy:
        // A state output bound to its state's buffer is an alias: nothing to copy. Any dtype
        // (int8 caches, their f32 scales): a byte copy.
        if (value_ptrs_[out[0]] != value_ptrs_[in[0]]) {
          std::memcpy(value_ptrs_[out[0]], value_ptrs_[in[0]], *CheckedByteSize(graph_.values[in[0]].dtype, shape(in[0])));
        }
        break;
      case OpKind::kQuantizeKv: {
        const int64_t h = op.ints[0], hd = op.ints[1];
        kernels::QuantizeKvRows(f32(in[0]), i8(out[0]), f32(out[1]), numel(in[0]) / (h * hd), h, hd);
        break;
      }
      case OpKind::kAttentionQ8: {
        const int64_t hq = op.ints[0], hkv = op.ints[1], hd = op.ints[2];
        const int64_t L = shape(in[5])[2];
        const int64_t t = numel(in[0]) / (hq * hd);
        auto heads = [&](int64_t hb, int64_t he, float* scratch) {
          kernels::AttentionQ8Heads(f32(in[0]), i8(in[1]), f32(in[2]), i8(in[3]), f32(in[4]), i8(in[5]), f32(in[6]),
                                    i8(in[7]), f32(in[8]), f32(in[9]), f32(out[0]), scratch, t, L, hq, hkv, hd,
                                    op.floats[0], op.floats[1], hb, he);
        };
        if (pool.size() > scratch_slots_ || pool.size() == 1 || hq == 1) {
          heads(0, hq, scratch_.as<float>());
        } else {  // split heads; each thread has its own score scratch
          pool.ParallelFor(hq, 1, [&](int64_t hb, int64_t he, int chunk) {
            heads(hb, he, scratch_.as<float>() + chunk * scratch_slot_floats_);
          });
        }
        break;
      }
      case OpKind::kKvCommitQ8: {
        const Shape& c = shape(in[5]);
        kernels::KvCommitQ8(i8(in[0]), f32(in[1]), i8(in[2]), f32(in[3]), i32(in[4]), i8(in[5]), f32(in[6]), i8(in[7]),
                            f32(in[8]), numel(in[4]), c[2], c[1], c[3]);
        break;
      }
      case OpKind::kGatherRow: {
        const int64_t d = numel(out[0]);
        const int64_t rows = numel(in[0]) / d;
        const int32_t row = *i32(in[1]);
        if (row < 0 || row >= rows) {
          return OutOfRange("method '" + name() + "': logits_row " + std::to_string(row) + " outside [0, " + std::to_string(rows) + ")");
        }
        std::copy_n(f32(in[0]) + row * d, d, f32(out[0]));
        break;
      }
    }
    if (observer != nullptr) {
      const int64_t now = SteadyNowNs();
      observer->OnOp(*this, op_index, op, op_start_ns, now);
      SLM_RETURN_IF_ERROR(observer->AfterOp(*this, op_index));
      op_start_ns = now;
    }
    ++op_index;
  }
  return Status::Ok();
}

}  // namespace slm::runtime
