// State outputs: rewrites a method so that it also returns every state it updates (as Hugging
// Face exports return the updated KV caches). For each state input "<base>.<i>" (or "<base>")
// the pass appends an output "<base>_out.<i>" (or "<base>_out") of the same dtype and shape,
// produced by a kCopy op placed after every op (so it sees the committed rows).
//
// A runner binds each such output to its state's buffer (an alias): the kCopy then sees the
// same pointer on both sides and copies nothing. Bound to another buffer, it is a real copy.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace slm::graph {

struct StateOutputBinding {
  std::string output;  // e.g. "k_cache_out.3"
  std::string binds;   // e.g. "k_cache.3"
};

// The output name for a state: "k_cache.3" → "k_cache_out.3", "state" → "state_out".
std::string StateOutputName(const std::string& state_name);

// Adds the outputs (after the existing ones, in state input order) and returns their bindings.
// InvalidArgument if a name it would add is already taken, or the graph has state outputs.
Result<std::vector<StateOutputBinding>> AddStateOutputs(Graph& g);

}  // namespace slm::graph
