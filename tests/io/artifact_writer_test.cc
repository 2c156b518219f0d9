// Round trip and writing behaviour of the artifact file (hostile input: artifact_reader_test).
#include "io/artifact_writer.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "io/artifact_reader.h"

namespace slm::io {
namespace {

namespace fs = std::filesystem;
using graph::Graph;
using graph::Op;
using graph::OpKind;
using graph::Value;
using graph::ValueKind;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "slm_artifact_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const { return (fs::path(path_) / name).string(); }
  std::vector<std::string> Entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    return out;
  }

 private:
  std::string path_;
};

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

constexpr int64_t kVocab = 64, kDim = 32;

std::vector<float> Pattern(size_t n, float seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = seed + 0.25f * static_cast<float>(i % 97);
  return v;
}

// A tiny tied-embedding LM: embedding → rms_norm → matmul(lm_head) → logits. Each method gets
// its own ConstantSource objects, so sharing must come from content deduplication.
Graph TinyLm(const std::string& name, int64_t step) {
  Graph g;
  g.name = name;
  int32_t ids = g.AddInput("input_ids", DType::kI32, {1, step});
  int32_t embed = g.AddConstant("embed", DType::kF32, {kVocab, kDim},
                                graph::MakeF32Constant(Pattern(kVocab * kDim, 1), "embed"));
  int32_t norm = g.AddConstant("norm", DType::kF32, {kDim},
                               graph::MakeF32Constant(Pattern(kDim, 2), "norm"));
  int32_t head = g.AddConstant("lm_head", DType::kF32, {kVocab, kDim},
                               graph::MakeF32Constant(Pattern(kVocab * kDim, 1), "lm_head"));
  // 3 bytes: forces padding before the next constant.
  int32_t odd = g.AddConstant("odd." + name, DType::kU8, {3},
                              std::make_shared<graph::OwnedConstant>(
                                  std::vector<uint8_t>{1, 2, static_cast<uint8_t>(step)}, "odd"));
  int32_t h = g.AddIntermediate("h", DType::kF32, {step, kDim});
  int32_t n = g.AddIntermediate("n", DType::kF32, {step, kDim});
  Value logits;
  logits.name = "logits";
  logits.shape = {1, step, kVocab};
  logits.kind = ValueKind::kOutput;
  int32_t out = g.AddValue(logits);
  g.outputs.push_back(out);
  g.AddOp(Op{OpKind::kEmbedding, {ids, embed}, {h}, {}, {1.0f}, "embed_tokens"});
  g.AddOp(Op{OpKind::kRmsNorm, {h, norm, odd}, {n}, {0}, {1e-6f}, "norm"});
  g.AddOp(Op{OpKind::kMatMul, {n, head}, {out}, {}, {}, "lm_head"});
  return g;
}

std::vector<Graph> TwoMethods() { return {TinyLm("prefill", 4), TinyLm("decode", 1)}; }

ArtifactContents Contents(std::vector<Graph>* methods) {
  ArtifactContents c;
  c.methods = methods;
  c.metadata_json = R"({"contract":"hf_static","version":1})";
  c.tokenizer_kind = "sentencepiece";
  c.tokenizer_bytes = std::string("\0tok\xff", 5);
  return c;
}

void ExpectSameGraph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name, b.name);
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    SCOPED_TRACE(a.values[i].name);
    EXPECT_EQ(a.values[i].name, b.values[i].name);
    EXPECT_EQ(a.values[i].dtype, b.values[i].dtype);
    EXPECT_EQ(a.values[i].shape, b.values[i].shape);
    EXPECT_EQ(a.values[i].kind, b.values[i].kind);
    EXPECT_EQ(a.values[i].constant_index, b.values[i].constant_index);
    EXPECT_EQ(a.values[i].arena_offset, b.values[i].arena_offset);
  }
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].kind, b.ops[i].kind);
    EXPECT_EQ(a.ops[i].inputs, b.ops[i].inputs);
    EXPECT_EQ(a.ops[i].outputs, b.ops[i].outputs);
    EXPECT_EQ(a.ops[i].ints, b.ops[i].ints);
    EXPECT_EQ(a.ops[i].floats, b.ops[i].floats);
    EXPECT_EQ(a.ops[i].debug, b.ops[i].debug);
  }
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_EQ(a.arena_bytes, b.arena_bytes);
}

TEST(ArtifactWriter, RoundTripStoresSharedWeightsOnce) {
  TempDir dir;
  const std::string path = dir.File("model.slm");
  std::vector<Graph> methods = TwoMethods();
  ASSERT_TRUE(WriteArtifact(path, Contents(&methods)).ok());

  auto file = ArtifactFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const ArtifactFile& a = **file;
  EXPECT_EQ(a.format_version(), 1u);
  EXPECT_EQ(a.producer(), kArtifactProducer);
  EXPECT_EQ(a.metadata_json(), R"({"contract":"hf_static","version":1})");
  EXPECT_EQ(a.tokenizer_kind(), "sentencepiece");
  EXPECT_EQ(a.tokenizer_bytes(), std::string_view("\0tok\xff", 5));
  EXPECT_EQ(a.method_names(), (std::vector<std::string>{"prefill", "decode"}));
  EXPECT_TRUE(a.VerifyConstantHashes().ok());

  // embed == lm_head and norm are shared by both methods; the two "odd" tables differ.
  ASSERT_EQ(a.constants().size(), 4u);
  auto prefill = a.LoadMethod("prefill");
  auto decode = a.LoadMethod("decode");
  ASSERT_TRUE(prefill.ok()) << prefill.status().ToString();
  ASSERT_TRUE(decode.ok()) << decode.status().ToString();
  ExpectSameGraph(*prefill, methods[0]);
  ExpectSameGraph(*decode, methods[1]);
  for (const char* name : {"embed", "lm_head", "norm"}) {
    int32_t p = prefill->values[prefill->FindValue(name)].constant_index;
    int32_t d = decode->values[decode->FindValue(name)].constant_index;
    EXPECT_EQ(p, d) << name;
    EXPECT_EQ(a.constants()[p].data, a.constants()[d].data) << name;
  }
  EXPECT_EQ(prefill->values[prefill->FindValue("embed")].constant_index,
            prefill->values[prefill->FindValue("lm_head")].constant_index);
  EXPECT_EQ(decode->values[decode->FindValue("odd.decode")].source, nullptr);

  // Bytes are the sources' bytes, page-aligned section, 64-aligned constants.
  const auto& embed = a.constants()[prefill->values[prefill->FindValue("embed")].constant_index];
  std::vector<float> expected = Pattern(kVocab * kDim, 1);
  ASSERT_EQ(embed.nbytes, expected.size() * 4);
  EXPECT_EQ(std::memcmp(embed.data, expected.data(), embed.nbytes), 0);
  uint64_t unique_bytes = 0;
  for (const auto& c : a.constants()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.data) % 64, 0u) << c.name;
    unique_bytes += c.nbytes;
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.constants()[0].data) % 4096, 0u);

  const std::string bytes = ReadBytes(path);
  ArtifactHeader h = DecodeArtifactHeader(reinterpret_cast<const uint8_t*>(bytes.data()));
  EXPECT_EQ(a.file_size(), bytes.size());
  EXPECT_LE(static_cast<double>(a.file_size()),
            1.02 * static_cast<double>(unique_bytes) + static_cast<double>(h.program_size) + 4096);
}

TEST(ArtifactWriter, OutputIsDeterministic) {
  TempDir dir;
  std::vector<Graph> first = TwoMethods(), second = TwoMethods();
  ASSERT_TRUE(WriteArtifact(dir.File("a.slm"), Contents(&first)).ok());
  ASSERT_TRUE(WriteArtifact(dir.File("b.slm"), Contents(&second)).ok());
  ASSERT_TRUE(WriteArtifact(dir.File("c.slm"), Contents(&first)).ok());  // already lifted+planned
  const std::string a = ReadBytes(dir.File("a.slm"));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, ReadBytes(dir.File("b.slm")));
  EXPECT_EQ(a, ReadBytes(dir.File("c.slm")));
}

TEST(ArtifactWriter, FileLayoutMatchesTheHeader) {
  TempDir dir;
  std::vector<Graph> methods = TwoMethods();
  ASSERT_TRUE(WriteArtifact(dir.File("m.slm"), Contents(&methods)).ok());
  const std::string bytes = ReadBytes(dir.File("m.slm"));
  ASSERT_GE(bytes.size(), 64u);
  EXPECT_EQ(bytes.substr(0, 8), "STATICLM");
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  ArtifactHeader h = DecodeArtifactHeader(p);
  EXPECT_EQ(h.format_version, 1u);
  EXPECT_EQ(h.header_bytes, 64u);
  EXPECT_EQ(h.program_offset, 64u);
  EXPECT_EQ(h.data_offset % 4096, 0u);
  EXPECT_GE(h.data_offset, 64 + h.program_size);
  EXPECT_EQ(h.data_offset + h.data_size, bytes.size());
  EXPECT_EQ(bytes.substr(64 + 4, 4), "SLMP");  // FlatBuffers file identifier
  EXPECT_EQ(h.checksum, ComputeArtifactChecksum(p, p + 64, h.program_size));
  EXPECT_EQ(bytes.substr(56, 8), std::string(8, '\0'));
  EXPECT_EQ(bytes.substr(64 + h.program_size, h.data_offset - 64 - h.program_size),
            std::string(h.data_offset - 64 - h.program_size, '\0'));
}

// Returns its bytes on the first `good_reads` reads, then fails (or changes its bytes).
class FlakySource final : public graph::ConstantSource {
 public:
  FlakySource(int good_reads, bool change) : good_reads_(good_reads), change_(change) {}
  Status Read(uint8_t* dst, uint64_t nbytes) const override {
    if (reads_++ < good_reads_) {
      std::memset(dst, 7, nbytes);
      return Status::Ok();
    }
    if (change_) {
      std::memset(dst, 8, nbytes);
      return Status::Ok();
    }
    return IoError("device unplugged");
  }
  std::string Describe() const override { return "flaky"; }

 private:
  int good_reads_;
  bool change_;
  mutable int reads_ = 0;
};

TEST(ArtifactWriter, FailureMidWriteLeavesNoFileAndKeepsTheOldOne) {
  TempDir dir;
  const std::string path = dir.File("model.slm");
  ASSERT_TRUE(WriteFileAtomically(path, "previous artifact").ok());
  for (bool change : {false, true}) {
    std::vector<Graph> methods = TwoMethods();
    // Lifting reads the source once; the failure hits while the data section is written.
    methods[1].AddConstant("flaky", DType::kU8, {4096}, std::make_shared<FlakySource>(1, change));
    Status s = WriteArtifact(path, Contents(&methods));
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("'flaky'"), std::string::npos) << s.message();
    EXPECT_EQ(dir.Entries(), std::vector<std::string>{"model.slm"});
    EXPECT_EQ(ReadBytes(path), "previous artifact");
  }
}

TEST(ArtifactWriter, AbandonedWriterRemovesItsTempFile) {
  TempDir dir;
  {
    auto w = AtomicFileWriter::Create(dir.File("x.slm"));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Write("abc", 3).ok());
    EXPECT_EQ(dir.Entries().size(), 1u);  // the temp file exists while writing
  }
  EXPECT_TRUE(dir.Entries().empty());
}

TEST(ArtifactWriter, RejectsBadContents) {
  TempDir dir;
  std::vector<Graph> none;
  EXPECT_EQ(WriteArtifact(dir.File("a.slm"), Contents(&none)).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(WriteArtifact(dir.File("a.slm"), ArtifactContents{}).ok());
  std::vector<Graph> twins = {TinyLm("decode", 1), TinyLm("decode", 1)};
  Status s = WriteArtifact(dir.File("a.slm"), Contents(&twins));
  EXPECT_NE(s.message().find("duplicate method name 'decode'"), std::string::npos) << s.message();
  std::vector<Graph> bad_plan = {TinyLm("decode", 1)};
  bad_plan[0].values[bad_plan[0].FindValue("h")].arena_offset = 1 << 20;  // planned, but wrong
  bad_plan[0].values[bad_plan[0].FindValue("n")].arena_offset = 0;
  s = WriteArtifact(dir.File("a.slm"), Contents(&bad_plan));
  EXPECT_EQ(s.code(), ErrorCode::kOutOfRange) << s.ToString();
  EXPECT_TRUE(dir.Entries().empty());
}

TEST(ArtifactWriter, KeepsAnExistingPlan) {
  TempDir dir;
  std::vector<Graph> methods = {TinyLm("decode", 1)};
  Graph& g = methods[0];
  // A valid, but not greedy, plan: h and n side by side.
  g.values[g.FindValue("h")].arena_offset = 0;
  g.values[g.FindValue("n")].arena_offset = 128;
  g.arena_bytes = 1024;
  ASSERT_TRUE(WriteArtifact(dir.File("m.slm"), Contents(&methods)).ok());
  auto file = ArtifactFile::Open(dir.File("m.slm"));
  ASSERT_TRUE(file.ok());
  auto loaded = (*file)->LoadMethod("decode");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->arena_bytes, 1024);
  EXPECT_EQ(loaded->values[loaded->FindValue("n")].arena_offset, 128);
}

}  // namespace
}  // namespace slm::io
