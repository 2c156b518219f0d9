#include "graph/graph.h"

#include <cstring>
#include <unordered_set>

namespace slm::graph {

const char* ValueKindName(ValueKind k) {
  switch (k) {
    case ValueKind::kInput: return "input";
    case ValueKind::kOutput: return "output";
    case ValueKind::kState: return "state";
    case ValueKind::kConstant: return "constant";
    case ValueKind::kIntermediate: return "intermediate";
  }
  return "unknown";
}

const char* OpKindName(OpKind k) {
  switch (k) {
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kRmsNorm: return "rms_norm";
    case OpKind::kMatMul: return "matmul";
    case OpKind::kRope: return "rope";
    case OpKind::kAttention: return "attention";
    case OpKind::kKvCommit: return "kv_commit";
    case OpKind::kAdd: return "add";
    case OpKind::kSwiGlu: return "swiglu";
    case OpKind::kGatherRow: return "gather_row";
    case OpKind::kGeGlu: return "geglu";
    case OpKind::kSoftCap: return "softcap";
    case OpKind::kMatMulQ: return "matmul_q";
    case OpKind::kEmbeddingQ: return "embedding_q";
    case OpKind::kCopy: return "copy";
    case OpKind::kQuantizeKv: return "quantize_kv";
    case OpKind::kAttentionQ8: return "attention_q8";
    case OpKind::kKvCommitQ8: return "kv_commit_q8";
  }
  return "unknown";
}

Status OwnedConstant::Read(uint8_t* dst, uint64_t nbytes) const {
  if (nbytes != bytes_.size()) {
    return Internal(what_ + ": constant holds " + std::to_string(bytes_.size()) +
                    " bytes, reader asked for " + std::to_string(nbytes));
  }
  if (nbytes) std::memcpy(dst, bytes_.data(), nbytes);
  return Status::Ok();
}

std::shared_ptr<const ConstantSource> MakeF32Constant(const std::vector<float>& values,
                                                      std::string what) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return std::make_shared<OwnedConstant>(std::move(bytes), std::move(what));
}

int32_t Graph::AddValue(Value v) {
  values.push_back(std::move(v));
  return static_cast<int32_t>(values.size() - 1);
}

int32_t Graph::AddInput(std::string n, DType dtype, Shape shape, ValueKind kind) {
  Value v;
  v.name = std::move(n);
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.kind = kind;
  int32_t id = AddValue(std::move(v));
  inputs.push_back(id);
  return id;
}

int32_t Graph::AddConstant(std::string n, DType dtype, Shape shape,
                           std::shared_ptr<const ConstantSource> source) {
  Value v;
  v.name = std::move(n);
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.kind = ValueKind::kConstant;
  v.source = std::move(source);
  return AddValue(std::move(v));
}

int32_t Graph::AddIntermediate(std::string n, DType dtype, Shape shape) {
  Value v;
  v.name = std::move(n);
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.kind = ValueKind::kIntermediate;
  return AddValue(std::move(v));
}

int32_t Graph::FindValue(const std::string& n) const {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == n) return static_cast<int32_t>(i);
  }
  return -1;
}

Status Graph::Validate() const {
  const int32_t n = static_cast<int32_t>(values.size());
  std::unordered_set<std::string> names;
  for (const Value& v : values) {
    if (!names.insert(v.name).second) {
      return InvalidArgument("method '" + name + "': duplicate value name '" + v.name + "'");
    }
    SLM_RETURN_IF_ERROR(CheckedByteSize(v.dtype, v.shape).status());
    if (v.kind == ValueKind::kConstant && !v.source && v.constant_index < 0) {
      return InvalidArgument("method '" + name + "': constant '" + v.name + "' has no data");
    }
  }
  std::vector<int> produced(values.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    std::string where = "method '" + name + "' op " + std::to_string(i) + " (" +
                        OpKindName(op.kind) + ")";
    for (int32_t id : op.inputs) {
      if (id < 0 || id >= n) return InvalidArgument(where + ": input id " + std::to_string(id) + " out of range");
      const Value& v = values[id];
      if ((v.kind == ValueKind::kIntermediate || v.kind == ValueKind::kOutput) && !produced[id]) {
        return InvalidArgument(where + ": reads '" + v.name + "' before it is produced");
      }
    }
    for (int32_t id : op.outputs) {
      if (id < 0 || id >= n) return InvalidArgument(where + ": output id " + std::to_string(id) + " out of range");
      const Value& v = values[id];
      if (v.kind != ValueKind::kIntermediate && v.kind != ValueKind::kOutput) {
        return InvalidArgument(where + ": writes '" + v.name + "' of kind " + ValueKindName(v.kind));
      }
      if (produced[id]++) return InvalidArgument(where + ": '" + v.name + "' produced twice");
    }
  }
  for (int32_t id : outputs) {
    if (id < 0 || id >= n) return InvalidArgument("method '" + name + "': output id out of range");
    if (!produced[id]) return InvalidArgument("method '" + name + "': output '" + values[id].name + "' is never produced");
  }
  for (int32_t id : inputs) {
    if (id < 0 || id >= n) return InvalidArgument("method '" + name + "': input id out of range");
    ValueKind k = values[id].kind;
    if (k != ValueKind::kInput && k != ValueKind::kState) {
      return InvalidArgument("method '" + name + "': input '" + values[id].name + "' has kind " + ValueKindName(k));
    }
  }
  return Status::Ok();
}

}  // namespace slm::graph
