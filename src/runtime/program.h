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
  Buffer scratch_;  // attention scores, (L + T) floats for the largest attention op
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
