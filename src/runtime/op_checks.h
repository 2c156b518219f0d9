// Shape and dtype checks for every op of a method, run once at load: an artifact is untrusted
// input, and the kernels trust the shapes they are given.
#pragma once

#include "core/status.h"
#include "graph/graph.h"

namespace slm::runtime {

Status CheckOpShapes(const graph::Graph& g);

}  // namespace slm::runtime
