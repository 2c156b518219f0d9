#include "graph/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace slm::graph {
namespace {

int32_t AddOp(Graph& g, std::vector<int32_t> inputs, std::vector<int32_t> outputs) {
  Op op;
  op.kind = OpKind::kAdd;
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  g.AddOp(std::move(op));
  return static_cast<int32_t>(g.ops.size() - 1);
}

int32_t AddOutput(Graph& g, std::string name, Shape shape) {
  Value v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.kind = ValueKind::kOutput;
  int32_t id = g.AddValue(std::move(v));
  g.outputs.push_back(id);
  return id;
}

// Lifetimes recomputed independently of the planner: [producer step, last reader step].
struct Life {
  size_t first = SIZE_MAX, last = 0;
};
std::vector<Life> Lifetimes(const Graph& g) {
  std::vector<Life> life(g.values.size());
  for (size_t s = 0; s < g.ops.size(); ++s) {
    for (int32_t id : g.ops[s].outputs) {
      life[id].first = std::min(life[id].first, s);
      life[id].last = std::max(life[id].last, s);
    }
  }
  for (size_t s = 0; s < g.ops.size(); ++s) {
    for (int32_t id : g.ops[s].inputs) life[id].last = std::max(life[id].last, s);
  }
  return life;
}

uint64_t Bytes(const Value& v) { return *CheckedByteSize(v.dtype, v.shape); }

// Brute force over all pairs: values alive at the same step never share a byte; every
// offset is aligned and inside the arena.
void ExpectValidPlan(const Graph& g) {
  std::vector<Life> life = Lifetimes(g);
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& a = g.values[i];
    if (a.kind != ValueKind::kIntermediate) {
      EXPECT_EQ(a.arena_offset, -1) << a.name;
      continue;
    }
    ASSERT_GE(a.arena_offset, 0) << a.name;
    EXPECT_EQ(a.arena_offset % kArenaAlignment, 0) << a.name;
    EXPECT_LE(a.arena_offset + static_cast<int64_t>(Bytes(a)), g.arena_bytes) << a.name;
    for (size_t j = i + 1; j < g.values.size(); ++j) {
      const Value& b = g.values[j];
      if (b.kind != ValueKind::kIntermediate) continue;
      bool live_together = life[i].first <= life[j].last && life[j].first <= life[i].last;
      bool bytes_overlap = a.arena_offset < b.arena_offset + static_cast<int64_t>(Bytes(b)) &&
                           b.arena_offset < a.arena_offset + static_cast<int64_t>(Bytes(a));
      EXPECT_FALSE(live_together && bytes_overlap)
          << a.name << " [" << a.arena_offset << ", +" << Bytes(a) << ") and " << b.name << " ["
          << b.arena_offset << ", +" << Bytes(b) << ") are live together";
    }
  }
}

// A random DAG: each op reads 1-3 earlier values and produces 1-2 intermediates of random
// (often unaligned) sizes; some intermediates are never read.
Graph RandomGraph(std::mt19937& rng, int num_ops) {
  Graph g;
  g.name = "random";
  std::vector<int32_t> readable = {g.AddInput("x", DType::kF32, {1, 8})};
  readable.push_back(g.AddConstant("w", DType::kF32, {8}, MakeF32Constant(std::vector<float>(8), "w")));
  std::uniform_int_distribution<int> nin(1, 3), nout(1, 2), dim(0, 700), dtype(0, 2);
  const DType kTypes[] = {DType::kF32, DType::kI8, DType::kF16};
  for (int s = 0; s < num_ops; ++s) {
    std::vector<int32_t> ins, outs;
    for (int k = nin(rng); k > 0; --k) {
      ins.push_back(readable[std::uniform_int_distribution<size_t>(0, readable.size() - 1)(rng)]);
    }
    for (int k = nout(rng); k > 0; --k) {
      outs.push_back(g.AddIntermediate("v" + std::to_string(g.values.size()), kTypes[dtype(rng)],
                                       {1, dim(rng)}));
    }
    AddOp(g, ins, outs);
    readable.insert(readable.end(), outs.begin(), outs.end());
  }
  int32_t out = AddOutput(g, "out", {1, 8});
  AddOp(g, {readable.back()}, {out});
  return g;
}

TEST(PlanMemory, RandomGraphsNeverOverlapLiveValues) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    Graph g = RandomGraph(rng, 1 + trial % 40);
    ASSERT_TRUE(PlanMemory(g).ok());
    ExpectValidPlan(g);
    if (HasFailure()) FAIL() << "trial " << trial;
  }
}

TEST(PlanMemory, ChainReusesMemory) {
  Graph g;
  g.name = "chain";
  int32_t prev = g.AddInput("x", DType::kF32, {1, 100});
  uint64_t sum = 0;
  for (int i = 0; i < 10; ++i) {
    int32_t next = g.AddIntermediate("h" + std::to_string(i), DType::kF32, {1, 100});
    sum += 400;
    AddOp(g, {prev}, {next});
    prev = next;
  }
  int32_t out = AddOutput(g, "out", {1, 100});
  AddOp(g, {prev}, {out});
  ASSERT_TRUE(PlanMemory(g).ok());
  ExpectValidPlan(g);
  // Two neighbours are live at once (an op's input and output): 2 x 448 (400 rounded to 64).
  EXPECT_EQ(g.arena_bytes, 2 * 448);
  EXPECT_LT(static_cast<uint64_t>(g.arena_bytes), sum);
}

TEST(PlanMemory, UnreadValueStillOccupiesItsProducersStep) {
  Graph g;
  g.name = "dead";
  int32_t x = g.AddInput("x", DType::kF32, {16});
  int32_t a = g.AddIntermediate("a", DType::kF32, {16});
  int32_t dead = g.AddIntermediate("dead", DType::kF32, {16});
  int32_t out = AddOutput(g, "out", {16});
  AddOp(g, {x}, {a, dead});
  AddOp(g, {a}, {out});
  ASSERT_TRUE(PlanMemory(g).ok());
  EXPECT_NE(g.values[a].arena_offset, g.values[dead].arena_offset);
  EXPECT_EQ(g.arena_bytes, 128);
  ExpectValidPlan(g);
}

TEST(PlanMemory, IsDeterministic) {
  std::mt19937 rng(7);
  Graph g = RandomGraph(rng, 30);
  Graph h = g;
  ASSERT_TRUE(PlanMemory(g).ok());
  ASSERT_TRUE(PlanMemory(h).ok());
  for (size_t i = 0; i < g.values.size(); ++i) EXPECT_EQ(g.values[i].arena_offset, h.values[i].arena_offset);
  EXPECT_EQ(g.arena_bytes, h.arena_bytes);
}

TEST(PlanMemory, GraphWithoutIntermediatesHasEmptyArena) {
  Graph g;
  g.name = "direct";
  int32_t x = g.AddInput("x", DType::kF32, {4});
  int32_t out = AddOutput(g, "out", {4});
  AddOp(g, {x}, {out});
  ASSERT_TRUE(PlanMemory(g).ok());
  EXPECT_EQ(g.arena_bytes, 0);
}

TEST(PlanMemory, RejectsAnIntermediateThatIsNeverProducedAndLeavesGraphUnchanged) {
  Graph g;
  g.name = "orphan";
  int32_t x = g.AddInput("x", DType::kF32, {4});
  int32_t a = g.AddIntermediate("a", DType::kF32, {4});
  g.AddIntermediate("orphan", DType::kF32, {4});
  int32_t out = AddOutput(g, "out", {4});
  AddOp(g, {x}, {a});
  AddOp(g, {a}, {out});
  Status s = PlanMemory(g);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'orphan'"), std::string::npos) << s.message();
  EXPECT_EQ(g.values[a].arena_offset, -1);
}

TEST(PlanMemory, RejectsInvalidGraphs) {
  Graph g;
  g.name = "bad";
  int32_t a = g.AddIntermediate("a", DType::kF32, {4});
  int32_t out = AddOutput(g, "out", {4});
  AddOp(g, {a}, {out});  // reads a before it is produced
  EXPECT_FALSE(PlanMemory(g).ok());
}

TEST(CheckMemoryPlan, NamesTheValueThatLeavesTheArena) {
  Graph g;
  g.name = "decode";
  int32_t x = g.AddIntermediate("x", DType::kF32, {1024});
  g.values[x].arena_offset = 4096;
  g.arena_bytes = 4096;
  Status s = CheckMemoryPlan(g);
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(s.message(),
            "method 'decode' value 'x' (intermediate): arena range [4096, 8192) exceeds "
            "arena_bytes 4096");
  g.values[x].arena_offset = 32;
  g.arena_bytes = 8192;
  EXPECT_NE(CheckMemoryPlan(g).message().find("not a multiple of 64"), std::string::npos);
  g.values[x].arena_offset = -1;
  EXPECT_FALSE(CheckMemoryPlan(g).ok());
  g.values[x].arena_offset = INT64_MAX - 63;
  EXPECT_FALSE(CheckMemoryPlan(g).ok());
  g.values[x].arena_offset = 4096;
  EXPECT_TRUE(CheckMemoryPlan(g).ok());
}

}  // namespace
}  // namespace slm::graph
