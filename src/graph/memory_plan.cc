#include "graph/memory_plan.h"

#include <algorithm>
#include <string>
#include <vector>

namespace slm::graph {
namespace {

// One intermediate to place: its footprint (rounded up to kArenaAlignment, so every block
// ends on an aligned boundary and any offset built from block ends stays aligned) and its
// lifetime [first, last] in op steps, both ends inclusive.
struct Block {
  int32_t id = -1;
  int64_t size = 0;
  size_t first = 0;
  size_t last = 0;
  int64_t offset = -1;
};

std::string WhereValue(const Graph& g, const Value& v) {
  return "method '" + g.name + "' value '" + v.name + "' (" + ValueKindName(v.kind) + ")";
}

Result<int64_t> AlignedFootprint(const Graph& g, const Value& v) {
  Result<uint64_t> bytes = CheckedByteSize(v.dtype, v.shape);
  if (!bytes.ok()) return OutOfRange(WhereValue(g, v) + ": " + bytes.status().message());
  constexpr uint64_t kMask = kArenaAlignment - 1;
  if (*bytes > static_cast<uint64_t>(INT64_MAX) - kMask) {
    return OutOfRange(WhereValue(g, v) + ": " + std::to_string(*bytes) + " bytes cannot be placed");
  }
  return static_cast<int64_t>((*bytes + kMask) & ~kMask);
}

// Lifetimes from op order. Graph::Validate has already guaranteed that each intermediate is
// produced at most once and never read before it is produced.
Result<std::vector<Block>> CollectBlocks(const Graph& g) {
  const size_t n = g.values.size();
  std::vector<int64_t> first(n, -1), last(n, -1);
  for (size_t step = 0; step < g.ops.size(); ++step) {
    for (int32_t id : g.ops[step].outputs) {
      if (first[id] < 0) first[id] = static_cast<int64_t>(step);
    }
    for (int32_t id : g.ops[step].inputs) last[id] = static_cast<int64_t>(step);
  }
  std::vector<Block> blocks;
  int64_t total = 0;
  for (size_t id = 0; id < n; ++id) {
    const Value& v = g.values[id];
    if (v.kind != ValueKind::kIntermediate) continue;
    if (first[id] < 0) {
      return InvalidArgument(WhereValue(g, v) + ": never produced by any op, cannot be planned");
    }
    Block b;
    b.id = static_cast<int32_t>(id);
    SLM_ASSIGN_OR_RETURN(b.size, AlignedFootprint(g, v));
    b.first = static_cast<size_t>(first[id]);
    b.last = static_cast<size_t>(std::max(first[id], last[id]));
    // Every offset the planner computes is at most the sum of all footprints, so checking the
    // sum once rules out overflow in the placement loop.
    if (__builtin_add_overflow(total, b.size, &total)) {
      return OutOfRange("method '" + g.name + "': intermediates overflow the arena size");
    }
    blocks.push_back(b);
  }
  return blocks;
}

bool LifetimesIntersect(const Block& a, const Block& b) {
  return a.first <= b.last && b.first <= a.last;
}

// Lowest offset at which `b` fits between the already placed blocks (sorted by offset) whose
// lifetimes intersect its own.
int64_t LowestFit(const Block& b, const std::vector<Block>& placed_by_offset) {
  int64_t candidate = 0;
  for (const Block& p : placed_by_offset) {
    if (p.size == 0 || !LifetimesIntersect(p, b)) continue;
    if (candidate + b.size <= p.offset) break;  // the gap before p is big enough
    candidate = std::max(candidate, p.offset + p.size);
  }
  return candidate;
}

}  // namespace

Status PlanMemory(Graph& g) {
  SLM_RETURN_IF_ERROR(g.Validate());
  SLM_ASSIGN_OR_RETURN(std::vector<Block> blocks, CollectBlocks(g));

  // Largest first: big blocks claim the low offsets, small ones fill the gaps. Ties are broken
  // by first use and id so the plan is deterministic.
  std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) {
    if (a.size != b.size) return a.size > b.size;
    if (a.first != b.first) return a.first < b.first;
    return a.id < b.id;
  });

  std::vector<Block> placed;  // sorted by offset
  placed.reserve(blocks.size());
  int64_t arena = 0;
  for (Block& b : blocks) {
    b.offset = LowestFit(b, placed);
    arena = std::max(arena, b.offset + b.size);
    auto pos = std::upper_bound(placed.begin(), placed.end(), b.offset,
                                [](int64_t off, const Block& p) { return off < p.offset; });
    placed.insert(pos, b);
  }

  for (const Block& b : blocks) g.values[b.id].arena_offset = b.offset;
  g.arena_bytes = arena;
  return Status::Ok();
}

Status CheckMemoryPlan(const Graph& g) {
  if (g.arena_bytes < 0) {
    return OutOfRange("method '" + g.name + "': negative arena_bytes " +
                      std::to_string(g.arena_bytes));
  }
  for (const Value& v : g.values) {
    if (v.kind != ValueKind::kIntermediate) continue;
    if (v.arena_offset < 0) {
      return OutOfRange(WhereValue(g, v) + ": negative arena offset " +
                        std::to_string(v.arena_offset) + " (not planned)");
    }
    if (v.arena_offset % kArenaAlignment != 0) {
      return OutOfRange(WhereValue(g, v) + ": arena offset " + std::to_string(v.arena_offset) +
                        " is not a multiple of " + std::to_string(kArenaAlignment));
    }
    Result<uint64_t> bytes = CheckedByteSize(v.dtype, v.shape);
    if (!bytes.ok()) return OutOfRange(WhereValue(g, v) + ": " + bytes.status().message());
    uint64_t end = 0;
    const uint64_t begin = static_cast<uint64_t>(v.arena_offset);
    if (__builtin_add_overflow(begin, *bytes, &end) ||
        end > static_cast<uint64_t>(g.arena_bytes)) {
      std::string end_text = end >= begin ? std::to_string(end) : "overflow";
      return OutOfRange(WhereValue(g, v) + ": arena range [" + std::to_string(begin) + ", " +
                        end_text + ") exceeds arena_bytes " + std::to_string(g.arena_bytes));
    }
  }
  return Status::Ok();
}

}  // namespace slm::graph
