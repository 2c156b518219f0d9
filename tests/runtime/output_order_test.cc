// Output order restoration: a backend that returns outputs in its own order labels them with
// their declared positions; the runtime restores the declared order, and ignores labels it
// cannot trust (with one warning) instead of crashing.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "io/artifact_writer.h"
#include "runtime/output_order.h"
#include "runtime/program.h"
#include "test_util.h"

namespace slm::testing {
namespace {

// A test backend: runs the method into its own buffers and hands the outputs back in the order
// `perm` says (perm[j] = declared position of the j-th returned output), labelled with `labels`
// (by default each output's true declared position).
class PermutingBackend {
 public:
  explicit PermutingBackend(runtime::Method& m) : m_(m) {
    for (const auto& o : m.outputs()) {
      bufs_.emplace_back(o.nbytes);
      EXPECT_TRUE(m.BindOutput(o.name, bufs_.back().data(), o.nbytes).ok());
    }
  }
  std::vector<runtime::ReturnedOutput> Run(const std::vector<size_t>& perm, std::vector<std::string> labels = {}) {
    EXPECT_TRUE(m_.Execute().ok());
    std::vector<runtime::ReturnedOutput> out;
    for (size_t j = 0; j < perm.size(); ++j) {
      const size_t k = perm[j];
      out.push_back({labels.empty() ? std::to_string(k) : labels[j], bufs_[k].data(), bufs_[k].size()});
    }
    return out;
  }

 private:
  runtime::Method& m_;
  std::vector<std::vector<uint8_t>> bufs_;
};

class OutputOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    graph::Graph g;
    g.name = "three";
    for (const char* n : {"a", "b", "c"}) {
      const int32_t in = g.AddInput(n, DType::kF32, {1, 2});
      graph::Value v;
      v.name = std::string("out_") + n;
      v.dtype = DType::kF32;
      v.shape = {1, 2};
      v.kind = graph::ValueKind::kOutput;
      const int32_t out = g.AddValue(v);
      graph::Op op;
      op.kind = graph::OpKind::kCopy;
      op.inputs = {in};
      op.outputs = {out};
      g.AddOp(op);
      g.outputs.push_back(out);
    }
    std::vector<graph::Graph> methods = {std::move(g)};
    const std::string path = MakeTempDir("order") + "/m.slm";
    ASSERT_TRUE(io::WriteArtifact(path, io::ArtifactContents{&methods, "{}", "", ""}).ok());
    auto p = runtime::Program::Load(path);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    program_ = *p;
    method_ = std::move(program_->LoadMethod("three")).value();
    for (int i = 0; i < 3; ++i) {
      in_[i] = {float(i), float(i) + 0.5f};
      ASSERT_TRUE(method_->BindInput(std::string(1, "abc"[i]), in_[i].data(), 8).ok());
    }
  }
  // Which input each returned output carries.
  std::vector<int> Carried(const std::vector<runtime::ReturnedOutput>& outs) {
    std::vector<int> r;
    for (const auto& o : outs) r.push_back(static_cast<int>(static_cast<const float*>(o.data)[0]));
    return r;
  }
  std::shared_ptr<runtime::Program> program_;
  std::unique_ptr<runtime::Method> method_;
  std::array<std::array<float, 2>, 3> in_;
};

TEST_F(OutputOrder, LabelledPermutationIsRestoredToTheDeclaredOrder) {
  PermutingBackend backend(*method_);
  for (std::vector<size_t> perm : {std::vector<size_t>{2, 0, 1}, {1, 2, 0}, {0, 1, 2}, {2, 1, 0}}) {
    auto outs = backend.Run(perm);
    int warnings = 0;
    runtime::RestoreDeclaredOrder(outs, method_->outputs().size(), [&](const std::string&) { ++warnings; });
    EXPECT_EQ(Carried(outs), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(warnings, 0);
  }
}

TEST_F(OutputOrder, UntrustworthyLabelsKeepTheReturnedOrderWithOneWarning) {
  PermutingBackend backend(*method_);
  const std::vector<std::vector<std::string>> bad = {
      {"0", "x", "2"},                          // not a number
      {"0", "1", "99999999999999999999999999"}, // overflows
      {"0", "1", "3"},                          // out of range
      {"0", "0", "1"},                          // duplicate
      {"-1", "1", "2"},                         // negative
      {"0", "1 ", "2"},                         // trailing garbage
      {"", "1", "2"},                           // empty
  };
  for (const auto& labels : bad) {
    auto outs = backend.Run({0, 1, 2}, labels);
    std::vector<std::string> warnings;
    runtime::RestoreDeclaredOrder(outs, 3, [&](const std::string& w) { warnings.push_back(w); });
    EXPECT_EQ(Carried(outs), (std::vector<int>{0, 1, 2})) << labels[0] << "," << labels[1] << "," << labels[2];
    EXPECT_EQ(warnings.size(), 1u);
  }
  // A count that differs from the declared outputs.
  auto outs = backend.Run({0, 1});
  int warnings = 0;
  runtime::RestoreDeclaredOrder(outs, 3, [&](const std::string&) { ++warnings; });
  EXPECT_EQ(Carried(outs), (std::vector<int>{0, 1}));
  EXPECT_EQ(warnings, 1);
}

TEST(OutputOrderLabels, MapsDeclaredPositionsToReturnedIndices) {
  std::vector<std::string> labels = {"2", "0", "1"};
  EXPECT_EQ(runtime::OutputOrderFromLabels(labels, 3, nullptr), (std::vector<size_t>{1, 2, 0}));
}

}  // namespace
}  // namespace slm::testing
