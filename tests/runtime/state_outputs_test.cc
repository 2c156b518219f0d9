// State outputs: the graph pass adds one output per state, and the runtime either aliases it to
// the state's buffer (no copy) or copies into a separate buffer; both see the committed rows.
#include <gtest/gtest.h>

#include <array>
#include <numeric>

#include "graph/state_outputs.h"
#include "io/artifact_writer.h"
#include "runtime/program.h"
#include "test_util.h"

namespace slm::testing {
namespace {

// k, v [1,4] and pos [1,1] committed into caches [1,1,2,4] (one kv head, 2 slots, head_dim 4).
graph::Graph CommitGraph() {
  graph::Graph g;
  g.name = "commit";
  const int32_t k = g.AddInput("k", DType::kF32, {1, 4});
  const int32_t v = g.AddInput("v", DType::kF32, {1, 4});
  const int32_t pos = g.AddInput("input_pos", DType::kI32, {1, 1});
  const int32_t kc = g.AddInput("k_cache.0", DType::kF32, {1, 1, 2, 4}, graph::ValueKind::kState);
  const int32_t vc = g.AddInput("v_cache.0", DType::kF32, {1, 1, 2, 4}, graph::ValueKind::kState);
  graph::Op op;
  op.kind = graph::OpKind::kKvCommit;
  op.inputs = {k, v, pos, kc, vc};
  g.AddOp(op);
  return g;
}

TEST(StateOutputs, NamesFollowTheStates) {
  EXPECT_EQ(graph::StateOutputName("k_cache.3"), "k_cache_out.3");
  EXPECT_EQ(graph::StateOutputName("state"), "state_out");
}

TEST(StateOutputs, PassAddsOneOutputPerStateAndRefusesToRunTwice) {
  graph::Graph g = CommitGraph();
  auto b = graph::AddStateOutputs(g);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->size(), 2u);
  EXPECT_EQ((*b)[0].output, "k_cache_out.0");
  EXPECT_EQ((*b)[0].binds, "k_cache.0");
  EXPECT_EQ((*b)[1].output, "v_cache_out.0");
  ASSERT_EQ(g.outputs.size(), 2u);
  EXPECT_EQ(g.ops.back().kind, graph::OpKind::kCopy);
  EXPECT_EQ(graph::AddStateOutputs(g).status().code(), ErrorCode::kInvalidArgument);
}

class StateOutputsRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    graph::Graph g = CommitGraph();
    ASSERT_TRUE(graph::AddStateOutputs(g).ok());
    std::vector<graph::Graph> methods = {std::move(g)};
    path_ = MakeTempDir("state-outputs") + "/m.slm";
    ASSERT_TRUE(io::WriteArtifact(path_, io::ArtifactContents{&methods, "{}", "", ""}).ok());
    auto p = runtime::Program::Load(path_);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    program_ = *p;
    auto m = program_->LoadMethod("commit");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    method_ = std::move(m).value();
    std::iota(k_.begin(), k_.end(), 1.0f);
    std::iota(v_.begin(), v_.end(), 10.0f);
    ASSERT_TRUE(method_->BindInput("k", k_.data(), 16).ok());
    ASSERT_TRUE(method_->BindInput("v", v_.data(), 16).ok());
    ASSERT_TRUE(method_->BindInput("input_pos", &pos_, 4).ok());
    ASSERT_TRUE(method_->BindInput("k_cache.0", kc_.data(), 32).ok());
    ASSERT_TRUE(method_->BindInput("v_cache.0", vc_.data(), 32).ok());
  }
  std::string path_;
  std::shared_ptr<runtime::Program> program_;
  std::unique_ptr<runtime::Method> method_;
  std::array<float, 4> k_{}, v_{};
  int32_t pos_ = 1;
  std::array<float, 8> kc_{}, vc_{};
};

TEST_F(StateOutputsRuntime, AliasedOutputsAreTheUpdatedStateBuffers) {
  ASSERT_TRUE(method_->BindOutput("k_cache_out.0", kc_.data(), 32).ok());
  ASSERT_TRUE(method_->BindOutput("v_cache_out.0", vc_.data(), 32).ok());
  ASSERT_TRUE(method_->Execute().ok());
  // Slot 1 holds the committed row; slot 0 is untouched.
  EXPECT_EQ(kc_[0], 0.0f);
  EXPECT_EQ(kc_[4], 1.0f);
  EXPECT_EQ(kc_[7], 4.0f);
  EXPECT_EQ(vc_[4], 10.0f);
}

TEST_F(StateOutputsRuntime, SeparateOutputBuffersReceiveACopyOfTheUpdatedState) {
  std::array<float, 8> ko{}, vo{};
  ko.fill(-1);
  vo.fill(-1);
  ASSERT_TRUE(method_->BindOutput("k_cache_out.0", ko.data(), 32).ok());
  ASSERT_TRUE(method_->BindOutput("v_cache_out.0", vo.data(), 32).ok());
  ASSERT_TRUE(method_->Execute().ok());
  EXPECT_EQ(ko, kc_);
  EXPECT_EQ(vo, vc_);
  EXPECT_EQ(ko[5], 2.0f);
}

}  // namespace
}  // namespace slm::testing
