// Memory planning: places every intermediate value of a method in one arena, reusing bytes of
// values whose lifetimes do not overlap (TFLite's "greedy by size" planner).
#pragma once

#include <cstdint>

#include "core/status.h"
#include "graph/graph.h"

namespace slm::graph {

// Alignment of every arena offset (and of every value's footprint): one cache line, and
// enough for any SIMD load the kernels issue.
inline constexpr int64_t kArenaAlignment = 64;

// Assigns Value::arena_offset to every kIntermediate value of `g` and sets g.arena_bytes.
// Inputs, outputs, states and constants are not placed (their offsets are left untouched).
//
// Lifetime: from the op that produces the value to the last op that reads it, in op-list
// order; a value that is never read still occupies its producer's step. Two values share
// bytes only when their lifetimes are disjoint. Offsets are multiples of kArenaAlignment.
// Deterministic: the same graph always gets the same plan.
//
// Fails (leaving `g` unchanged) when `g` does not pass Graph::Validate, when an intermediate
// is never produced, or when sizes overflow.
Status PlanMemory(Graph& g);

// Checks an existing plan cheaply: every intermediate has a kArenaAlignment-aligned offset
// and lies inside [0, arena_bytes). Does not check for overlaps (that needs lifetimes).
// Errors read "method 'decode' value 'x' (intermediate): arena range [a, b) exceeds
// arena_bytes n".
Status CheckMemoryPlan(const Graph& g);

}  // namespace slm::graph
