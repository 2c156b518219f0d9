// The bad-input catalogue (docs/bad-inputs.md) as tests: one test per table row, run through
// the API the row names, whose outcome must contain the row's expected text. The table is the
// source of truth and is read at startup, so the document and the tests cannot drift: a row
// without a case, or a case without a row, fails too.
//
// Outcomes are normalized before comparison: the case's temp directory reads "<dir>", and
// successful calls read "OK: ..." (rows that document a defined, non-error behaviour).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <regex>
#include <set>

#include "artifact_generated.h"
#include "core/memory_limit.h"
#include "e2e/artifacts.h"
#include "io/artifact_reader.h"
#include "io/artifact_writer.h"
#include "io/safetensors.h"
#include "llm/runner.h"
#include "llm/sentencepiece_tokenizer.h"
#include "llm/session_snapshot.h"
#include "model/compiler.h"
#include "model/model_spec.h"
#include "runtime/program.h"

namespace slm::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- Helpers ------------------------------------------------------------------------------

// Replaces `dir` in `text` with "<dir>".
std::string Normalize(std::string text, const std::string& dir) {
  for (size_t at; (at = text.find(dir)) != std::string::npos;) text.replace(at, dir.size(), "<dir>");
  return text;
}

std::string Outcome(const Status& s) { return s.ok() ? "OK" : s.ToString(); }
template <typename T>
std::string Outcome(const Result<T>& r) { return r.ok() ? "OK" : r.status().ToString(); }

// A writable copy of the stories260K checkpoint directory.
std::string CopyCheckpoint(const std::string& dir) {
  fs::create_directories(dir + "/ckpt");
  for (const auto& e : fs::directory_iterator(Stories())) {
    const std::string to = dir + "/ckpt/" + e.path().filename().string();
    fs::copy_file(e.path(), to);
    fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write);
  }
  return dir + "/ckpt";
}

std::string U64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

std::string Safetensors(const std::string& header, const std::string& data = "") {
  return U64(header.size()) + header + data;
}

// Opens <dir>/model.safetensors after writing `bytes` there.
std::string OpenSafetensors(const std::string& dir, const std::string& bytes) {
  WriteFile(dir + "/model.safetensors", bytes);
  return Outcome(io::SafetensorsCheckpoint::OpenFile(dir + "/model.safetensors"));
}

// Compiles a copy of stories260K whose model.safetensors went through `edit`.
std::string CompileWithTensorEdit(const std::string& dir,
                                  const std::function<void(json&, std::string&)>& edit) {
  const std::string ckpt = CopyCheckpoint(dir);
  auto [header, data] = SplitSafetensors(ReadFile(ckpt + "/model.safetensors"));
  edit(header, data);
  WriteFile(ckpt + "/model.safetensors", JoinSafetensors(header, data));
  model::CompileOptions opt;
  opt.max_context_len = 16;
  opt.prefill_steps = {4};
  return Outcome(model::CompileCheckpoint(ckpt, dir + "/m.slm", opt));
}

// Sets element `i` of float32 tensor `name` to `value` in (header, data).
void SetF32(const json& header, std::string& data, const std::string& name, size_t i, float value) {
  const uint64_t begin = header.at(name).at("data_offsets")[0].get<uint64_t>();
  std::memcpy(data.data() + begin + 4 * i, &value, 4);
}

// Writes `config` (edited stories260K config.json, or raw text) and loads the spec.
std::string LoadSpecWithConfig(const std::string& dir, const std::string& file, const std::string& text) {
  const std::string ckpt = CopyCheckpoint(dir);
  WriteFile(ckpt + "/" + file, text);
  return Outcome(model::LoadModelSpec(ckpt));
}
std::string LoadSpecWithEdit(const std::string& dir, const std::function<void(json&)>& edit) {
  json cfg = ReadJson(Stories() + "/config.json");
  edit(cfg);
  return LoadSpecWithConfig(dir, "config.json", cfg.dump());
}

// A small compiled stories260K artifact (shared by the artifact rows).
std::string SmallStoriesArtifact() { return CompiledArtifact(Stories(), {4}, 16); }

std::string LoadRunnerOutcome(const std::string& path) { return Outcome(llm::Runner::Load(path)); }

// Rebuilds the artifact at `src` into `dst` after `edit` changed its program: the checksum and
// layout are recomputed, so the loader's later checks (not the checksum) must catch the defect.
std::string RewriteArtifact(const std::string& src, const std::string& dst,
                            const std::function<void(io::ProgramParts&, std::vector<graph::Graph>&,
                                                     std::string& metadata)>& edit) {
  const std::string bytes = ReadFile(src);
  const io::ArtifactHeader h = io::DecodeArtifactHeader(reinterpret_cast<const uint8_t*>(bytes.data()));
  const fb::Program* program = fb::GetProgram(bytes.data() + h.program_offset);
  auto artifact = io::ArtifactFile::Open(src);
  EXPECT_TRUE(artifact.ok());
  std::vector<graph::Graph> methods;
  for (const std::string& name : (*artifact)->method_names()) methods.push_back(*(*artifact)->LoadMethod(name));
  std::string metadata = (*artifact)->metadata_json();
  std::string tokenizer_kind = (*artifact)->tokenizer_kind();
  std::string tokenizer_bytes((*artifact)->tokenizer_bytes());
  io::ProgramParts parts;
  parts.tokenizer_kind = tokenizer_kind;
  parts.tokenizer_bytes = tokenizer_bytes;
  for (const fb::Constant* c : *program->constants()) {
    io::ConstantRecord r;
    r.name = c->name()->str();
    r.dtype = static_cast<DType>(c->dtype());
    r.shape.assign(c->shape()->begin(), c->shape()->end());
    r.offset = c->offset();
    r.nbytes = c->nbytes();
    r.xxh64 = c->xxh64();
    parts.constants.push_back(r);
  }
  edit(parts, methods, metadata);
  parts.metadata_json = metadata;
  for (const graph::Graph& g : methods) parts.methods.push_back(&g);
  auto serialized = io::SerializeProgram(parts);
  EXPECT_TRUE(serialized.ok());
  io::ArtifactHeader nh;
  nh.program_size = serialized->size();
  nh.data_offset = (io::kArtifactHeaderBytes + nh.program_size + io::kArtifactDataAlignment - 1) /
                   io::kArtifactDataAlignment * io::kArtifactDataAlignment;
  nh.data_size = h.data_size;
  const auto header = io::EncodeArtifactHeader(nh, *serialized);
  std::string out(reinterpret_cast<const char*>(header.data()), header.size());
  out += *serialized;
  out.resize(nh.data_offset, '\0');
  out += bytes.substr(h.data_offset, h.data_size);
  WriteFile(dst, out);
  return dst;
}

std::string RewriteMetadata(const std::string& dir, const std::function<void(json&)>& edit) {
  return RewriteArtifact(SmallStoriesArtifact(), dir + "/m.slm", [&](io::ProgramParts&, std::vector<graph::Graph>&, std::string& m) {
    json j = json::parse(m);
    edit(j);
    m = j.dump();
  });
}

// Writes `bytes` as an artifact and opens it through the runner (Program::Load + session).
std::string LoadArtifactBytes(const std::string& dir, const std::string& bytes) {
  WriteFile(dir + "/m.slm", bytes);
  return LoadRunnerOutcome(dir + "/m.slm");
}

// Patches the u64 at `at` of an artifact and re-encodes its checksum over the new header.
std::string PatchHeaderU64(std::string bytes, size_t at, uint64_t value) {
  std::memcpy(bytes.data() + at, &value, 8);
  io::ArtifactHeader h = io::DecodeArtifactHeader(reinterpret_cast<const uint8_t*>(bytes.data()));
  const std::string_view program(bytes.data() + 64, std::min<uint64_t>(h.program_size, bytes.size() - 64));
  const auto header = io::EncodeArtifactHeader(h, program);
  std::memcpy(bytes.data(), header.data(), header.size());
  return bytes;
}

// A session snapshot of stories260K after 3 tokens.
std::string Snapshot(const std::string& dir) {
  auto runner = llm::Runner::Load(SmallStoriesArtifact());
  EXPECT_TRUE(runner.ok());
  std::vector<float> logits((*runner)->metadata().vocab_size);
  const int32_t ids[3] = {1, 403, 407};
  EXPECT_TRUE((*runner)->session().Feed(ids, logits).ok());
  const std::string path = dir + "/s.snap";
  EXPECT_TRUE((*runner)->session().SaveSnapshot(path).ok());
  return path;
}
std::string LoadSnapshotBytes(const std::string& dir, const std::string& bytes) {
  WriteFile(dir + "/bad.snap", bytes);
  auto runner = llm::Runner::Load(SmallStoriesArtifact());
  EXPECT_TRUE(runner.ok());
  return Outcome((*runner)->session().LoadSnapshot(dir + "/bad.snap"));
}

// Runs the CLI through bash with `prefix` (e.g. ulimits) before it; returns stderr, "exit N: ".
std::string RunCliWith(const std::string& dir, const std::string& prefix, const std::string& args) {
  const std::string cmd = "bash -c \"" + prefix + " exec " + CliPath() + " " + args + "\" >" + dir +
                          "/out 2>" + dir + "/err";
  const int rc = std::system(cmd.c_str());
  std::string err = ReadFile(dir + "/err");
  if (!err.empty() && err.back() == '\n') err.pop_back();
  const int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
  return "exit " + std::to_string(code) + ": " + err;
}

// Files named `name` or `name.tmp.*` under `dir`: what a failed write left behind.
std::string Leftovers(const std::string& dir, const std::string& name) {
  std::string s;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f == name || f.rfind(name + ".tmp", 0) == 0) s += " " + f;
  }
  return s.empty() ? "; nothing left" : "; left:" + s;
}

// ---- The cases, by row id ------------------------------------------------------------------

using Case = std::function<std::string(const std::string& dir)>;

std::map<std::string, Case> CatalogueCases() {
  std::map<std::string, Case> c;
  const std::string real_st = Stories() + "/model.safetensors";

  // safetensors: structure.
  c["st-empty"] = [](const std::string& d) { return OpenSafetensors(d, ""); };
  c["st-cut-in-length"] = [](const std::string& d) { return OpenSafetensors(d, std::string(5, '\0')); };
  c["st-length-beyond-file"] = [](const std::string& d) { return OpenSafetensors(d, U64(1000000) + "{}"); };
  c["st-cut-in-header"] = [real_st](const std::string& d) {
    std::string b = ReadFile(real_st);
    uint64_t n;
    std::memcpy(&n, b.data(), 8);
    return OpenSafetensors(d, U64(n / 2) + b.substr(8, n / 2));
  };
  c["st-cut-in-data"] = [real_st](const std::string& d) {
    std::string b = ReadFile(real_st);
    return OpenSafetensors(d, b.substr(0, b.size() - 1000));
  };
  c["st-header-not-object"] = [](const std::string& d) { return OpenSafetensors(d, Safetensors("[1,2]")); };
  c["st-header-not-utf8"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors("{\"w\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", std::string(4, '\0')));
  };
  c["st-missing-dtype"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')));
  };
  c["st-dtype-f64"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')));
  };
  c["st-negative-dim"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0')));
  };
  c["st-overflowing-dims"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", std::string(4, '\0')));
  };
  c["st-offsets-reversed"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", std::string(4, '\0')));
  };
  c["st-offsets-beyond-data"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"w":{"dtype":"F32","shape":[1024],"data_offsets":[0,4096]}})", std::string(16, '\0')));
  };
  c["st-offset-near-u64-max"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551615]}})", std::string(4, '\0')));
  };
  c["st-size-mismatch"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0')));
  };
  c["st-overlap"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0')));
  };
  c["st-duplicate-name"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0')));
  };
  c["st-metadata-not-string"] = [](const std::string& d) {
    return OpenSafetensors(d, Safetensors(R"({"__metadata__":{"format":1}})"));
  };
  c["st-index-escapes-dir"] = [](const std::string& d) {
    WriteFile(d + "/model.safetensors.index.json", R"({"weight_map":{"w":"../../etc/passwd"}})");
    return Outcome(io::SafetensorsCheckpoint::OpenDir(d));
  };
  c["st-index-missing-shard"] = [](const std::string& d) {
    WriteFile(d + "/model.safetensors.index.json", R"({"weight_map":{"w":"model-00001-of-00002.safetensors"}})");
    return Outcome(io::SafetensorsCheckpoint::OpenDir(d));
  };
  // safetensors: content that parses but cannot be compiled.
  c["st-nan-weight"] = [](const std::string& d) {
    return CompileWithTensorEdit(d, [](json& h, std::string& data) {
      SetF32(h, data, "model.norm.weight", 3, std::nanf(""));
    });
  };
  c["st-inf-weight"] = [](const std::string& d) {
    return CompileWithTensorEdit(d, [](json& h, std::string& data) {
      SetF32(h, data, "model.layers.0.input_layernorm.weight", 7, -std::numeric_limits<float>::infinity());
    });
  };
  c["st-integer-weight"] = [](const std::string& d) {
    return CompileWithTensorEdit(d, [](json& h, std::string&) { h["model.norm.weight"]["dtype"] = "I32"; });
  };
  c["st-wrong-shape-weight"] = [](const std::string& d) {
    return CompileWithTensorEdit(d, [](json& h, std::string&) { h["model.norm.weight"]["shape"] = {8, 8}; });
  };
  c["st-missing-weight"] = [](const std::string& d) {
    return CompileWithTensorEdit(d, [](json& h, std::string&) { h.erase("model.layers.2.mlp.up_proj.weight"); });
  };

  // Files that are not what they should be.
  c["file-checkpoint-missing"] = [](const std::string& d) { return Outcome(model::LoadModelSpec(d + "/nope")); };
  c["file-config-is-directory"] = [](const std::string& d) {
    const std::string ckpt = CopyCheckpoint(d);
    fs::remove(ckpt + "/config.json");
    fs::create_directory(ckpt + "/config.json");
    return Outcome(model::LoadModelSpec(ckpt));
  };
  c["file-safetensors-is-directory"] = [](const std::string& d) {
    fs::create_directory(d + "/model.safetensors");
    return Outcome(io::SafetensorsCheckpoint::OpenDir(d));
  };
  c["file-config-symlink-loop"] = [](const std::string& d) {
    const std::string ckpt = CopyCheckpoint(d);
    fs::remove(ckpt + "/config.json");
    fs::create_symlink("config.json", ckpt + "/config.json");
    return Outcome(model::LoadModelSpec(ckpt));
  };
  c["file-safetensors-is-fifo"] = [](const std::string& d) {
    EXPECT_EQ(::mkfifo((d + "/model.safetensors").c_str(), 0600), 0);
    return Outcome(io::SafetensorsCheckpoint::OpenDir(d));
  };
  c["file-artifact-is-fifo"] = [](const std::string& d) {
    EXPECT_EQ(::mkfifo((d + "/m.slm").c_str(), 0600), 0);
    return LoadRunnerOutcome(d + "/m.slm");
  };
  c["file-artifact-is-device"] = [](const std::string&) { return LoadRunnerOutcome("/dev/zero"); };
  c["file-config-unreadable"] = [](const std::string& d) -> std::string {
    if (::geteuid() == 0) return "SKIP: running as root, whom file permissions do not stop";
    const std::string ckpt = CopyCheckpoint(d);
    fs::permissions(ckpt + "/config.json", fs::perms::none);
    return Outcome(model::LoadModelSpec(ckpt));
  };

  // config.json / generation_config.json / tokenizer_config.json.
  c["cfg-empty"] = [](const std::string& d) { return LoadSpecWithConfig(d, "config.json", ""); };
  c["cfg-truncated"] = [](const std::string& d) {
    const std::string text = ReadFile(Stories() + "/config.json");
    return LoadSpecWithConfig(d, "config.json", text.substr(0, text.size() / 2));
  };
  c["cfg-not-utf8"] = [](const std::string& d) {
    std::string text = ReadFile(Stories() + "/config.json");
    text.replace(text.find("LlamaForCausalLM"), 5, "Ll\xff\xfe");
    return LoadSpecWithConfig(d, "config.json", text);
  };
  c["cfg-size-is-string"] = [](const std::string& d) { return LoadSpecWithEdit(d, [](json& j) { j["hidden_size"] = "64"; }); };
  c["cfg-size-absurd"] = [](const std::string& d) { return LoadSpecWithEdit(d, [](json& j) { j["hidden_size"] = 1000000000000; }); };
  c["cfg-heads-zero"] = [](const std::string& d) { return LoadSpecWithEdit(d, [](json& j) { j["num_attention_heads"] = 0; }); };
  c["cfg-kv-heads-not-divisor"] = [](const std::string& d) { return LoadSpecWithEdit(d, [](json& j) { j["num_key_value_heads"] = 3; }); };
  c["cfg-vocab-negative"] = [](const std::string& d) { return LoadSpecWithEdit(d, [](json& j) { j["vocab_size"] = -512; }); };
  c["cfg-eps-nan"] = [](const std::string& d) {
    std::string text = ReadFile(Stories() + "/config.json");
    const size_t at = text.find("\"rms_norm_eps\"");
    text.insert(at, "\"rms_norm_eps\": NaN, ");
    return LoadSpecWithConfig(d, "config.json", text);
  };
  c["cfg-architecture-unsupported"] = [](const std::string& d) {
    return LoadSpecWithEdit(d, [](json& j) { j["architectures"] = {"MambaForCausalLM"}; });
  };
  c["cfg-rope-type-unknown"] = [](const std::string& d) {
    return LoadSpecWithEdit(d, [](json& j) { j["rope_scaling"] = {{"rope_type", "warp"}, {"factor", 2.0}}; });
  };
  c["gen-eos-outside-vocab"] = [](const std::string& d) {
    return LoadSpecWithConfig(d, "generation_config.json", R"({"eos_token_id": 99999})");
  };
  c["tokcfg-template-not-string"] = [](const std::string& d) {
    return LoadSpecWithConfig(d, "tokenizer_config.json", R"({"chat_template": 5})");
  };

  // SentencePiece tokenizer.model and prompt text.
  c["spm-empty"] = [](const std::string& d) {
    WriteFile(d + "/tokenizer.model", "");
    return Outcome(llm::SentencePieceTokenizer::FromFile(d + "/tokenizer.model"));
  };
  c["spm-garbage"] = [](const std::string& d) {
    WriteFile(d + "/tokenizer.model", "this is not a protobuf \xff\xff\xff\xff");
    return Outcome(llm::SentencePieceTokenizer::FromFile(d + "/tokenizer.model"));
  };
  c["spm-truncated"] = [](const std::string& d) {
    const std::string b = ReadFile(Stories() + "/tokenizer.model");
    WriteFile(d + "/tokenizer.model", b.substr(0, b.size() / 2));
    return Outcome(llm::SentencePieceTokenizer::FromFile(d + "/tokenizer.model"));
  };
  c["prompt-not-utf8"] = [](const std::string&) -> std::string {
    auto runner = llm::Runner::Load(SmallStoriesArtifact());
    auto ids = (*runner)->Encode("a\xff\xfe b");
    if (!ids.ok()) return ids.status().ToString();
    std::string s = "OK: ids";
    for (int32_t id : *ids) s += " " + std::to_string(id);
    return s;
  };
  c["prompt-id-outside-vocab"] = [](const std::string&) {
    auto runner = llm::Runner::Load(SmallStoriesArtifact());
    const int32_t ids[2] = {1, 999999};
    return Outcome((*runner)->Generate(ids, {}));
  };
  c["prompt-longer-than-context"] = [](const std::string&) {
    auto runner = llm::Runner::Load(SmallStoriesArtifact());
    std::vector<int32_t> ids(20, 100);
    return Outcome((*runner)->Generate(ids, {}));
  };

  // Artifacts: raw bytes.
  c["art-empty"] = [](const std::string& d) { return LoadArtifactBytes(d, ""); };
  c["art-not-an-artifact"] = [](const std::string& d) { return LoadArtifactBytes(d, ReadFile(Stories() + "/config.json")); };
  c["art-cut-in-header"] = [](const std::string& d) { return LoadArtifactBytes(d, ReadFile(SmallStoriesArtifact()).substr(0, 40)); };
  c["art-cut-in-program"] = [](const std::string& d) { return LoadArtifactBytes(d, ReadFile(SmallStoriesArtifact()).substr(0, 200)); };
  c["art-cut-in-data"] = [](const std::string& d) {
    const std::string b = ReadFile(SmallStoriesArtifact());
    return LoadArtifactBytes(d, b.substr(0, b.size() - 100));
  };
  c["art-trailing-bytes"] = [](const std::string& d) { return LoadArtifactBytes(d, ReadFile(SmallStoriesArtifact()) + "junk"); };
  c["art-format-version"] = [](const std::string& d) {
    std::string b = ReadFile(SmallStoriesArtifact());
    b[8] = 2;
    return LoadArtifactBytes(d, b);
  };
  c["art-flipped-program-byte"] = [](const std::string& d) {
    std::string b = ReadFile(SmallStoriesArtifact());
    b[300] ^= 0x5a;
    return LoadArtifactBytes(d, b);
  };
  c["art-program-size-lies"] = [](const std::string& d) {
    return LoadArtifactBytes(d, PatchHeaderU64(ReadFile(SmallStoriesArtifact()), 24, uint64_t{1} << 40));
  };
  c["art-data-size-lies"] = [](const std::string& d) {
    return LoadArtifactBytes(d, PatchHeaderU64(ReadFile(SmallStoriesArtifact()), 40, ~uint64_t{0} - 4095));
  };
  c["art-weight-bytes-corrupt"] = [](const std::string& d) {
    std::string b = ReadFile(SmallStoriesArtifact());
    b[b.size() - 8] ^= 0x01;
    WriteFile(d + "/m.slm", b);
    auto a = io::ArtifactFile::Open(d + "/m.slm");
    return a.ok() ? Outcome((*a)->VerifyConstantHashes()) : a.status().ToString();
  };
  c["art-is-directory"] = [](const std::string& d) { return LoadRunnerOutcome(d); };
  c["art-symlink-loop"] = [](const std::string& d) {
    fs::create_symlink("m.slm", d + "/m.slm");
    return LoadRunnerOutcome(d + "/m.slm");
  };
  // Artifacts: a valid checksum over a lying program.
  c["art-constant-outside-data"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteArtifact(SmallStoriesArtifact(), d + "/m.slm", [](io::ProgramParts& p, auto&, auto&) {
      p.constants[0].offset = uint64_t{1} << 32;
    }));
  };
  c["art-constant-nbytes-lies"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteArtifact(SmallStoriesArtifact(), d + "/m.slm", [](io::ProgramParts& p, auto&, auto&) {
      p.constants[0].nbytes += 64;
    }));
  };
  c["art-constant-dims-overflow"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteArtifact(SmallStoriesArtifact(), d + "/m.slm", [](io::ProgramParts& p, auto&, auto&) {
      p.constants[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
    }));
  };
  c["art-op-input-not-a-value"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteArtifact(SmallStoriesArtifact(), d + "/m.slm", [](auto&, std::vector<graph::Graph>& m, auto&) {
      m[0].ops[0].inputs[0] = 1000000;
    }));
  };
  c["art-arena-beyond-memory"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteArtifact(SmallStoriesArtifact(), d + "/m.slm", [](auto&, std::vector<graph::Graph>& m, auto&) {
      m[0].arena_bytes = int64_t{1} << 50;
    }));
  };
  c["art-memory-limit"] = [](const std::string&) {
    const std::string artifact = SmallStoriesArtifact();  // compiled before the limit applies
    SetMemoryLimitBytes(4096);
    std::string s = LoadRunnerOutcome(artifact);
    SetMemoryLimitBytes(0);
    return s;
  };
  c["art-memory-limit-cli"] = [](const std::string& d) {
    return RunCliWith(d, "", "--memory-limit 4K run " + SmallStoriesArtifact() + " --prompt-ids 1 -n 2");
  };
  c["cli-memory-limit-not-a-size"] = [](const std::string& d) {
    return RunCliWith(d, "", "--memory-limit 12X run " + SmallStoriesArtifact() + " --prompt-ids 1 -n 2");
  };
  c["art-metadata-not-json"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteArtifact(SmallStoriesArtifact(), d + "/m.slm", [](auto&, auto&, std::string& m) { m = "{\"contract\": "; }));
  };
  c["art-metadata-wrong-type"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteMetadata(d, [](json& j) { j["max_context_len"] = "16"; }));
  };
  c["art-metadata-contract-version"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteMetadata(d, [](json& j) { j["version"] = 7; }));
  };
  c["art-metadata-cache-beyond-memory"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteMetadata(d, [](json& j) {
      for (json& g : j["cache"]["groups"]) g["cache_len"] = int64_t{1} << 40;
    }));
  };
  c["art-metadata-method-missing"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteMetadata(d, [](json& j) { j["methods"][0]["name"] = "prefill_999"; }));
  };
  c["art-tokenizer-garbage"] = [](const std::string& d) {
    return LoadRunnerOutcome(RewriteArtifact(SmallStoriesArtifact(), d + "/m.slm", [](io::ProgramParts& p, auto&, auto&) {
      static const std::string garbage = "\x0a\xff\xff\xff\xff\x0f garbage";
      p.tokenizer_bytes = garbage;
    }));
  };

  // Session snapshots.
  c["snap-empty"] = [](const std::string& d) { return LoadSnapshotBytes(d, ""); };
  c["snap-not-a-snapshot"] = [](const std::string& d) { return LoadSnapshotBytes(d, ReadFile(Stories() + "/config.json")); };
  c["snap-truncated"] = [](const std::string& d) {
    const std::string b = ReadFile(Snapshot(d));
    return LoadSnapshotBytes(d, b.substr(0, b.size() - 7));
  };
  c["snap-flipped-byte"] = [](const std::string& d) {
    std::string b = ReadFile(Snapshot(d));
    b[b.size() - 3] ^= 0x10;
    return LoadSnapshotBytes(d, b);
  };

  // Outputs.
  c["out-disk-full"] = [](const std::string& d) {
    // RLIMIT_FSIZE makes write() fail with EFBIG once the file reaches 64 KiB, as a full disk
    // would (with ENOSPC); SIGXFSZ is ignored so the write returns the error.
    return RunCliWith(d, "trap '' XFSZ; ulimit -f 64;", "compile " + Stories() + " -o " + d + "/m.slm --max-context 16 --prefill-step 8") +
           Leftovers(d, "m.slm");
  };
  c["out-directory-missing"] = [](const std::string& d) {
    return RunCliWith(d, "", "compile " + Stories() + " -o " + d + "/no/such/dir/m.slm --max-context 16 --prefill-step 8");
  };
  c["out-is-directory"] = [](const std::string& d) {
    fs::create_directory(d + "/m.slm");
    return RunCliWith(d, "", "compile " + Stories() + " -o " + d + "/m.slm --max-context 16 --prefill-step 8") + Leftovers(d, "m.slm");
  };
  return c;
}

// ---- The table -----------------------------------------------------------------------------

struct Row {
  std::string id, expected;
};

// Rows of docs/bad-inputs.md: "| `id` | format | input | `expected` |" (the first and last
// cells in backticks).
std::vector<Row> ReadRows() {
  std::vector<Row> rows;
  std::istringstream in(ReadFile(SourceDir() + "/docs/bad-inputs.md"));
  static const std::regex kRow(R"(^\| `([a-z0-9-]+)` \|.*\| `(.*)` \|\s*$)");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, m, kRow)) rows.push_back({m[1], m[2]});
  }
  return rows;
}

// The table's cell escapes '|' as "\|" (Markdown); the message has the bare character.
std::string Unescape(std::string s) {
  for (size_t at; (at = s.find("\\|")) != std::string::npos;) s.erase(at, 1);
  return s;
}

class BadInputCatalogue : public ::testing::TestWithParam<Row> {};

TEST_P(BadInputCatalogue, GivesTheDocumentedOutcome) {
  const Row& row = GetParam();
  const auto cases = CatalogueCases();
  auto it = cases.find(row.id);
  ASSERT_NE(it, cases.end()) << "docs/bad-inputs.md row '" << row.id << "' has no case in " << __FILE__;
  const std::string dir = MakeTempDir("bad-" + row.id);
  const std::string actual = Normalize(it->second(dir), dir);
  if (actual.rfind("SKIP: ", 0) == 0) GTEST_SKIP() << actual;
  if (std::getenv("SLM_PRINT_BAD_INPUTS")) std::printf("ROW\t%s\t%s\n", row.id.c_str(), actual.c_str());
  EXPECT_NE(actual.find(Unescape(row.expected)), std::string::npos)
      << "row '" << row.id << "'\n  expected (docs/bad-inputs.md): " << row.expected << "\n  actual: " << actual;
}

std::string RowName(const ::testing::TestParamInfo<Row>& info) {
  std::string s = info.param.id;
  for (char& ch : s) if (ch == '-') ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Rows, BadInputCatalogue, ::testing::ValuesIn(ReadRows()), RowName);

TEST(BadInputCatalogueTable, HasARowForEveryCaseAndAtLeastForty) {
  std::set<std::string> ids;
  for (const Row& r : ReadRows()) EXPECT_TRUE(ids.insert(r.id).second) << "duplicate row " << r.id;
  for (const auto& [id, fn] : CatalogueCases()) EXPECT_TRUE(ids.count(id)) << "case '" << id << "' has no row in docs/bad-inputs.md";
  EXPECT_GE(ids.size(), 40u);
}

}  // namespace
}  // namespace slm::testing
