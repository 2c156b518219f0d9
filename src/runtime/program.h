// Program: a loaded artifact (mmapped, verified). Method: one of its fixed-shape methods,
// bound to caller buffers by name and executed op by op over an arena planned at compile time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "graph/graph.h"
#include "io/artifact_reader.h"

namespace slm::runtime {

struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;
  graph::ValueKind kind;  // kInput, kState (inputs) or kOutput
  uint64_t nbytes = 0;
};

class Method;

// Per-op observation (timing trace, per-layer activation capture). Installed per thread with
// ScopedOpObserver; Execute() reads it once per call, so an unset observer costs one
// thread-local load per Execute and nothing per op.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // Called after op `index` of `method` ran; [start_ns, end_ns) on the steady clock. The op's
  // output data is readable through method.value_data(id) during the call.
  virtual void OnOp(const Method& method, size_t index, const graph::Op& op, int64_t start_ns,
                    int64_t end_ns) = 0;
  // Asked after OnOp: a non-OK status stops Execute() with that error, as a failing op would.
  // Lets tests inject a method failure after some of its ops (cache writes) already ran.
  virtual Status AfterOp(const Method& /*method*/, size_t /*index*/) { return Status::Ok(); }
};

// Installs `observer` for Method::Execute calls on this thread while alive (nests: restores
// the previous one).
class ScopedOpObserver {
 public:
  explicit ScopedOpObserver(OpObserver* observer);
  ~ScopedOpObserver();
  ScopedOpObserver(const ScopedOpObserver&) = delete;
  ScopedOpObserver& operator=(const ScopedOpObserver&) = delete;

 private:
  OpObserver* previous_;
};

class Method {
 public:
  const std::string& name() const { return graph_.name; }
  // The declared signature, in order.
  const std::vector<TensorSpec>& inputs() const { return inputs_; }
  const std::vector<TensorSpec>& outputs() const { return outputs_; }
  const TensorSpec* FindInput(const std::string& name) const;
  const TensorSpec* FindOutput(const std::string& name) const;
  int64_t arena_bytes() const { return graph_.arena_bytes; }
  const graph::Graph& graph() const { return graph_; }
  // Where value `id` lives once bound (arena, bound buffer or mapped constant); null if unbound.
  const void* value_data(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < value_ptrs_.size() ? value_ptrs_[id] : nullptr;
  }

  // Binds a caller buffer to an input/state or output by name. `nbytes` must equal the
  // declared size exactly; the buffer must outlive every Execute() that uses it.
  Status BindInput(const std::string& name, void* data, uint64_t nbytes);
  Status BindOutput(const std::string& name, void* data, uint64_t nbytes);
  // Runs the op list. Every input and output must be bound. Allocates nothing.
  Status Execute();

 private:
  friend class Program;
  Method() = default;
  Status Prepare(std::shared_ptr<const io::ArtifactFile> artifact, graph::Graph g, Allocator& alloc);
  Status Bind(const std::vector<TensorSpec>& specs, const std::string& what, const std::string& name,
              void* data, uint64_t nbytes);

  std::shared_ptr<const io::ArtifactFile> artifact_;  // keeps the weights mapped
  graph::Graph graph_;
  std::vector<TensorSpec> inputs_, outputs_;
  std::vector<uint8_t*> value_ptrs_;  // per value id: where its data lives once bound
  Buffer arena_;
  Buffer scratch_;  // attention scores, (L + T) floats for the largest attention op, per thread
  int64_t scratch_slot_floats_ = 0;  // floats of one thread's slot in scratch_
  int scratch_slots_ = 1;            // thread slots in scratch_ (the pool size at load)
  // Dynamic-activation kMatMulQ (8da8w / 8da4w): the int8 rows, their scales and group sums,
  // sized for the largest such op.
  Buffer quant_scratch_;
  int64_t quant_xs_offset_ = 0, quant_gs_offset_ = 0;
};

class Program {
 public:
  // mmaps and verifies the artifact (structure, bounds, checksums of header and program).
  static Result<std::shared_ptr<Program>> Load(const std::string& path);
  const io::ArtifactFile& artifact() const { return *artifact_; }
  std::vector<std::string> method_names() const { return artifact_->method_names(); }
  // Loads one method: deserializes, checks every op's shapes, and allocates its arena.
  Result<std::unique_ptr<Method>> LoadMethod(const std::string& name,
                                             Allocator& alloc = DefaultAllocator()) const;

 private:
  std::shared_ptr<const io::ArtifactFile> artifact_;
};

}  // namespace slm::runtime
