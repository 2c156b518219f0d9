#include "runtime/program.h"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"
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
  // Attention scratch: one score row of (L + T) floats, sized for the largest attention op.
  int64_t scratch_floats = 0;
  for (const graph::Op& op : graph_.ops) {
    if (op.kind != OpKind::kAttention) continue;
    const int64_t L = graph_.values[op.inputs[3]].shape[2];
    const int64_t T = *CheckedNumElements(graph_.values[op.inputs[0]].shape) / (op.ints[0] * op.ints[2]);
    scratch_floats = std::max(scratch_floats, L + T);
  }
  scratch_ = Buffer::Allocate(static_cast<size_t>(scratch_floats) * sizeof(float), alloc);
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

Status Method::Execute() {
  for (size_t i = 0; i < graph_.inputs.size(); ++i) {
    if (value_ptrs_[graph_.inputs[i]] == nullptr) return FailedPrecondition("method '" + name() + "': input '" + inputs_[i].name + "' is not bound");
  }
  for (size_t i = 0; i < graph_.outputs.size(); ++i) {
    if (value_ptrs_[graph_.outputs[i]] == nullptr) return FailedPrecondition("method '" + name() + "': output '" + outputs_[i].name + "' is not bound");
  }
  auto f32 = [&](int32_t id) { return reinterpret_cast<float*>(value_ptrs_[id]); };
  auto i32 = [&](int32_t id) { return reinterpret_cast<const int32_t*>(value_ptrs_[id]); };
  auto numel = [&](int32_t id) { return *CheckedNumElements(graph_.values[id].shape); };
  auto shape = [&](int32_t id) -> const Shape& { return graph_.values[id].shape; };

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
        kernels::RmsNorm(f32(in[0]), f32(in[1]), f32(out[0]), numel(in[0]) / d, d, op.floats[0], op.ints[0] != 0);
        break;
      }
      case OpKind::kMatMul: {
        const int64_t n = shape(in[1])[0], k = shape(in[1])[1];
        kernels::MatMulF32(f32(in[0]), f32(in[1]), in.size() == 3 ? f32(in[2]) : nullptr, f32(out[0]), numel(in[0]) / k, k, n);
        break;
      }
      case OpKind::kRope: {
        const int64_t t = numel(in[1]);
        kernels::Rope(f32(in[0]), i32(in[1]), f32(in[2]), f32(out[0]), t, op.ints[0], op.ints[1], op.ints[2], op.floats[0]);
        break;
      }
      case OpKind::kAttention: {
        const int64_t hq = op.ints[0], hkv = op.ints[1], hd = op.ints[2];
        const int64_t L = shape(in[3])[2];
        const int64_t t = numel(in[0]) / (hq * hd);
        kernels::Attention(f32(in[0]), f32(in[1]), f32(in[2]), f32(in[3]), f32(in[4]), f32(in[5]), f32(out[0]),
                           scratch_.as<float>(), t, L, hq, hkv, hd, op.floats[0], op.floats[1]);
        break;
      }
      case OpKind::kKvCommit: {
        const Shape& c = shape(in[3]);
        kernels::KvCommit(f32(in[0]), f32(in[1]), i32(in[2]), f32(in[3]), f32(in[4]), numel(in[2]), c[2], c[1], c[3]);
        break;
      }
      case OpKind::kAdd:
        kernels::Add(f32(in[0]), f32(in[1]), f32(out[0]), numel(in[0]));
        break;
      case OpKind::kSwiGlu:
        kernels::SwiGlu(f32(in[0]), f32(in[1]), f32(out[0]), numel(in[0]));
        break;
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
  }
  return Status::Ok();
}

}  // namespace slm::runtime
