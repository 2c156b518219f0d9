// The reader treats artifacts as hostile: every defect is a clear error, never a crash.
#include "io/artifact_reader.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "io/artifact_writer.h"

namespace slm::io {
namespace {

namespace fs = std::filesystem;
using graph::Graph;
using graph::Op;
using graph::OpKind;
using graph::Value;
using graph::ValueKind;

class ArtifactReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "slm_reader_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = (fs::path(dir_) / "m.slm").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteRaw(const std::string& bytes) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::string ReadRaw() {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Opens path_ and expects failure with `code` and a message containing `needle`.
  void ExpectOpenFails(ErrorCode code, const std::string& needle) {
    auto file = ArtifactFile::Open(path_);
    ASSERT_FALSE(file.ok()) << "opened a bad file";
    EXPECT_EQ(file.status().code(), code) << file.status().ToString();
    EXPECT_NE(file.status().message().find(needle), std::string::npos)
        << "'" << needle << "' not in: " << file.status().message();
    EXPECT_EQ(file.status().message().rfind(path_ + ": ", 0), 0u) << "message must name the file";
  }

  std::string dir_, path_;
};

// A minimal valid method: out = (x + w) + w, through one intermediate.
Graph SmallMethod() {
  Graph g;
  g.name = "decode";
  int32_t x = g.AddInput("x", DType::kF32, {1, 4});
  int32_t w = g.AddConstant("w", DType::kF32, {4}, nullptr);
  g.values[w].constant_index = 0;
  int32_t y = g.AddIntermediate("y", DType::kF32, {1, 4});
  g.values[y].arena_offset = 0;
  Value out;
  out.name = "out";
  out.shape = {1, 4};
  out.kind = ValueKind::kOutput;
  int32_t o = g.AddValue(out);
  g.outputs.push_back(o);
  g.AddOp(Op{OpKind::kAdd, {x, w}, {y}, {}, {}, ""});
  g.AddOp(Op{OpKind::kAdd, {y, w}, {o}, {}, {}, ""});
  g.arena_bytes = 64;
  return g;
}

const std::string kData(16, '\x01');

ConstantRecord SmallConstant() {
  return ConstantRecord{"w", DType::kF32, {4}, 0, 16, XXH64(kData.data(), kData.size(), 0)};
}

// Assembles a file around a hand-built program, with a correct checksum, so that only the
// semantic checks can catch what the program says.
std::string Craft(const Graph& g, const ConstantRecord& c, const std::string& data = kData,
                  uint32_t version = kArtifactFormatVersion) {
  ProgramParts parts;
  parts.constants = {c};
  parts.methods = {&g};
  std::string program = *SerializeProgram(parts);
  ArtifactHeader h;
  h.format_version = version;
  h.program_size = program.size();
  h.data_offset = (64 + program.size() + 4095) / 4096 * 4096;
  h.data_size = data.size();
  auto header = EncodeArtifactHeader(h, program);
  std::string file(reinterpret_cast<const char*>(header.data()), header.size());
  file += program;
  file.resize(h.data_offset, '\0');
  return file + data;
}

TEST_F(ArtifactReaderTest, CraftedBaselineOpens) {
  WriteRaw(Craft(SmallMethod(), SmallConstant()));
  auto file = ArtifactFile::Open(path_);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE((*file)->VerifyConstantHashes().ok());
  EXPECT_TRUE((*file)->LoadMethod("decode").ok());
  auto missing = (*file)->LoadMethod("prefill");
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no method 'prefill' (methods: decode)"), std::string::npos);
}

TEST_F(ArtifactReaderTest, MissingFileIsNotFound) {
  EXPECT_EQ(ArtifactFile::Open(path_).status().code(), ErrorCode::kNotFound);
}

TEST_F(ArtifactReaderTest, EmptyFile) {
  WriteRaw("");
  ExpectOpenFails(ErrorCode::kParseError, "empty file");
}

TEST_F(ArtifactReaderTest, WrongMagic) {
  WriteRaw("PK\x03\x04 this is a zip file, honest" + std::string(100, 'z'));
  ExpectOpenFails(ErrorCode::kParseError, "not a staticlm artifact");
  WriteRaw("STAT");
  ExpectOpenFails(ErrorCode::kParseError, "not a staticlm artifact");
}

TEST_F(ArtifactReaderTest, TruncatedAnywhere) {
  const std::string good = Craft(SmallMethod(), SmallConstant());
  const ArtifactHeader h = DecodeArtifactHeader(reinterpret_cast<const uint8_t*>(good.data()));
  WriteRaw(good.substr(0, 40));
  ExpectOpenFails(ErrorCode::kParseError, "truncated header");
  WriteRaw(good.substr(0, 64 + h.program_size / 2));
  ExpectOpenFails(ErrorCode::kParseError, "program_size");
  WriteRaw(good.substr(0, h.data_offset + 5));
  ExpectOpenFails(ErrorCode::kParseError, "truncated: the data section");
  // Every few bytes through header and program, then a few points in padding and data.
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 64 + h.program_size; n += 7) cuts.push_back(n);
  for (size_t n : {h.data_offset - 1, h.data_offset, good.size() - 1}) cuts.push_back(n);
  for (size_t n : cuts) {
    WriteRaw(good.substr(0, n));
    EXPECT_FALSE(ArtifactFile::Open(path_).ok()) << "truncated to " << n;
  }
}

TEST_F(ArtifactReaderTest, TrailingBytesAreRejected) {
  WriteRaw(Craft(SmallMethod(), SmallConstant()) + "x");
  ExpectOpenFails(ErrorCode::kParseError, "1 unexpected bytes after the data section");
}

TEST_F(ArtifactReaderTest, EveryFlippedHeaderByteIsCaught) {
  const std::string good = Craft(SmallMethod(), SmallConstant());
  for (size_t i = 0; i < 64; ++i) {
    std::string bad = good;
    bad[i] ^= 0x10;
    WriteRaw(bad);
    EXPECT_FALSE(ArtifactFile::Open(path_).ok()) << "flipped header byte " << i;
  }
  std::string bad = good;
  bad[33] ^= 0x01;  // data_offset
  WriteRaw(bad);
  ExpectOpenFails(ErrorCode::kParseError, "header or program corrupted: checksum 0x");
}

TEST_F(ArtifactReaderTest, FlippedProgramByteFailsTheChecksum) {
  std::string bad = Craft(SmallMethod(), SmallConstant());
  bad[64 + 20] ^= 0x01;
  WriteRaw(bad);
  ExpectOpenFails(ErrorCode::kParseError, "header or program corrupted: checksum");
  ExpectOpenFails(ErrorCode::kParseError, " expected 0x");
}

TEST_F(ArtifactReaderTest, UnknownFormatVersion) {
  WriteRaw(Craft(SmallMethod(), SmallConstant(), kData, 2));
  ExpectOpenFails(ErrorCode::kUnsupported, "unsupported format_version 2 (this reader supports 1)");
}

TEST_F(ArtifactReaderTest, FlippedWeightByteIsCaughtByVerifyConstantHashes) {
  std::string bad = Craft(SmallMethod(), SmallConstant());
  bad[bad.size() - 1] ^= 0x01;
  WriteRaw(bad);
  auto file = ArtifactFile::Open(path_);
  ASSERT_TRUE(file.ok());  // weights are not hashed at open: that is the slow, optional check
  Status s = (*file)->VerifyConstantHashes();
  EXPECT_NE(s.message().find("constant 0 'w': data corrupted"), std::string::npos) << s.message();
}

TEST_F(ArtifactReaderTest, ProgramThatIsNotAFlatBuffer) {
  std::string program(256, '\xee');
  std::memcpy(program.data() + 4, "SLMP", 4);
  ArtifactHeader h;
  h.program_size = program.size();
  h.data_offset = 4096;
  auto header = EncodeArtifactHeader(h, program);
  std::string file(reinterpret_cast<const char*>(header.data()), 64);
  file += program;
  file.resize(4096, '\0');
  WriteRaw(file);
  ExpectOpenFails(ErrorCode::kParseError, "failed verification");
  std::memcpy(file.data() + 64 + 4, "NOPE", 4);
  header = EncodeArtifactHeader(h, std::string_view(file).substr(64, program.size()));
  std::memcpy(file.data(), header.data(), 64);
  WriteRaw(file);
  ExpectOpenFails(ErrorCode::kParseError, "identifier is not \"SLMP\"");
}

TEST_F(ArtifactReaderTest, LyingConstantTable) {
  ConstantRecord c = SmallConstant();
  c.offset = 64;  // beyond the 16-byte data section
  WriteRaw(Craft(SmallMethod(), c));
  ExpectOpenFails(ErrorCode::kOutOfRange, "constant 0 'w': range [64, +16) lies outside the data section (16 bytes)");

  c = SmallConstant();
  c.offset = UINT64_MAX - 63;  // aligned, and offset + nbytes overflows
  WriteRaw(Craft(SmallMethod(), c));
  ExpectOpenFails(ErrorCode::kOutOfRange, "lies outside the data section");

  c = SmallConstant();
  c.offset = 8;
  WriteRaw(Craft(SmallMethod(), c, std::string(64, '\1')));
  ExpectOpenFails(ErrorCode::kParseError, "offset 8 is not a multiple of 64");

  c = SmallConstant();
  c.nbytes = 12;
  WriteRaw(Craft(SmallMethod(), c));
  ExpectOpenFails(ErrorCode::kParseError, "nbytes 12 but float32 [4] needs 16");

  c = SmallConstant();
  c.dtype = static_cast<DType>(200);
  WriteRaw(Craft(SmallMethod(), c));
  ExpectOpenFails(ErrorCode::kParseError, "constant 0 'w': unknown dtype 200");

  c = SmallConstant();
  c.shape = {INT64_MAX, 4};
  WriteRaw(Craft(SmallMethod(), c));
  ExpectOpenFails(ErrorCode::kOutOfRange, "constant 0 'w'");
}

TEST_F(ArtifactReaderTest, LyingMethods) {
  struct Case {
    const char* what;
    void (*mutate)(Graph&);
    ErrorCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"arena overflow", [](Graph& g) { g.values[2].arena_offset = 64; },
       ErrorCode::kOutOfRange,
       "method 'decode' value 'y' (intermediate): arena range [64, 80) exceeds arena_bytes 64"},
      {"negative arena", [](Graph& g) { g.arena_bytes = -5; }, ErrorCode::kOutOfRange, "negative arena_bytes"},
      {"unplanned intermediate", [](Graph& g) { g.values[2].arena_offset = -1; },
       ErrorCode::kOutOfRange, "(not planned)"},
      {"arena on input", [](Graph& g) { g.values[0].arena_offset = 0; }, ErrorCode::kParseError,
       "value 0 'x' (input): has arena offset 0 but is not an intermediate"},
      {"constant index out of range", [](Graph& g) { g.values[1].constant_index = 1; },
       ErrorCode::kOutOfRange, "value 1 'w' (constant): constant index 1 out of range [0, 1)"},
      {"constant index on input", [](Graph& g) { g.values[0].constant_index = 0; },
       ErrorCode::kParseError, "but is not a constant"},
      {"constant shape mismatch", [](Graph& g) { g.values[1].shape = {2, 2}; }, ErrorCode::kParseError,
       "is float32 [2, 2] but its constant 'w' is float32 [4]"},
      {"unknown value dtype", [](Graph& g) { g.values[0].dtype = static_cast<DType>(99); },
       ErrorCode::kParseError, "value 0 'x' (input): unknown dtype 99"},
      {"unknown value kind", [](Graph& g) { g.values[0].kind = static_cast<ValueKind>(77); },
       ErrorCode::kParseError, "value 0 'x': unknown kind 77"},
      {"negative dimension", [](Graph& g) { g.values[0].shape = {1, -4}; }, ErrorCode::kOutOfRange,
       "negative dimension"},
      {"overflowing shape", [](Graph& g) { g.values[0].shape = {1LL << 40, 1LL << 40}; },
       ErrorCode::kOutOfRange, "overflows"},
      {"unknown op", [](Graph& g) { g.ops[1].kind = static_cast<OpKind>(999); }, ErrorCode::kParseError,
       "method 'decode' op 1: unknown op kind 999"},
      {"op input id", [](Graph& g) { g.ops[0].inputs[1] = 17; }, ErrorCode::kOutOfRange,
       "op 0: inputs[1] = 17 is not a value id (method has 4 values)"},
      {"op output id", [](Graph& g) { g.ops[0].outputs[0] = -3; }, ErrorCode::kOutOfRange,
       "op 0: outputs[0] = -3"},
      {"method output id", [](Graph& g) { g.outputs = {4}; }, ErrorCode::kOutOfRange,
       "method 'decode': outputs[0] = 4"},
      {"method input id", [](Graph& g) { g.inputs = {-1}; }, ErrorCode::kOutOfRange,
       "method 'decode': inputs[0] = -1"},
      {"graph invalid", [](Graph& g) { std::swap(g.ops[0], g.ops[1]); }, ErrorCode::kInvalidArgument,
       "reads 'y' before it is produced"},
      {"no name", [](Graph& g) { g.name = ""; }, ErrorCode::kParseError, "method 0 has no name"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Graph g = SmallMethod();
    c.mutate(g);
    WriteRaw(Craft(g, SmallConstant()));
    ExpectOpenFails(c.code, c.needle);
  }
}

TEST_F(ArtifactReaderTest, DuplicateOrMissingMethods) {
  Graph g = SmallMethod();
  ProgramParts parts;
  parts.constants = {SmallConstant()};
  for (int copies : {0, 2}) {
    parts.methods.assign(copies, &g);
    std::string program = *SerializeProgram(parts);
    ArtifactHeader h;
    h.program_size = program.size();
    h.data_offset = 4096;
    h.data_size = kData.size();
    auto header = EncodeArtifactHeader(h, program);
    std::string file(reinterpret_cast<const char*>(header.data()), 64);
    file += program;
    file.resize(4096, '\0');
    WriteRaw(file + kData);
    ExpectOpenFails(ErrorCode::kParseError, copies ? "duplicate method name 'decode'" : "no methods");
  }
}

// Random corruption of the program with a recomputed (valid) checksum: exercises the
// FlatBuffers verifier and the semantic checks. Must never crash (run under ASan/UBSan too).
TEST_F(ArtifactReaderTest, RandomProgramCorruptionNeverCrashes) {
  std::vector<Graph> methods = {SmallMethod()};
  methods[0].values[1].source = graph::MakeF32Constant({1, 2, 3, 4}, "w");
  ASSERT_TRUE(WriteArtifact(path_, ArtifactContents{&methods, "{}", "", ""}).ok());
  const std::string good = ReadRaw();
  const ArtifactHeader h = DecodeArtifactHeader(reinterpret_cast<const uint8_t*>(good.data()));
  std::mt19937 rng(42);
  int opened = 0, semantic = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    std::string bad = good;
    for (int k = 1 + trial % 4; k > 0; --k) {
      size_t at = 64 + std::uniform_int_distribution<size_t>(0, h.program_size - 1)(rng);
      bad[at] = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    }
    auto header = EncodeArtifactHeader(h, std::string_view(bad).substr(64, h.program_size));
    std::memcpy(bad.data(), header.data(), 64);
    WriteRaw(bad);
    auto file = ArtifactFile::Open(path_);
    if (!file.ok()) {
      // Caught past the FlatBuffers verifier: by the constant table or method checks.
      const std::string& m = file.status().message();
      if (m.find(": method ") != std::string::npos || m.find(": constant ") != std::string::npos) ++semantic;
      continue;
    }
    ++opened;  // a harmless change (e.g. in a float or a debug string): everything still works
    for (const std::string& name : (*file)->method_names()) (void)(*file)->LoadMethod(name);
    (void)(*file)->VerifyConstantHashes();
  }
  EXPECT_LT(opened, 1500);
  EXPECT_GT(semantic, 20);
}

}  // namespace
}  // namespace slm::io
