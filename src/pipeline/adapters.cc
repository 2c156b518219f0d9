// Built-in adapters: model loader "hf", calibration "text_file" / "jsonl" / "random", quantizer
// "none", compiler "cpu", evaluator "default", pass "validate". Device runners: device.cc.
#include "pipeline/adapters.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "core/atomic_file.h"
#include "core/mapped_file.h"
#include "graph/memory_plan.h"
#include "llm/runner.h"
#include "llm/sentencepiece_tokenizer.h"
#include "model/compiler.h"
#include "pipeline/quant_bridge.h"

extern char** environ;

namespace slm::pipeline {
namespace fs = std::filesystem;

// ---- helpers ------------------------------------------------------------------------------------

std::string HexU64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t HashString(const std::string& s) { return XXH3_64bits(s.data(), s.size()); }

Result<uint64_t> HashFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open to hash");
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) XXH3_64bits_update(st, buf.data(), static_cast<size_t>(in.gcount()));
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

std::string SelfExecutable() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

Result<int> RunProcess(const std::vector<std::string>& argv, std::string* output, const std::string& cwd) {
  if (argv.empty()) return InvalidArgument("RunProcess: empty command");
  std::string out_path = (fs::temp_directory_path() / ("slm-proc-" + std::to_string(::getpid()) + "-" +
                                                        std::to_string(std::rand()))).string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (output != nullptr) {
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  }
  std::vector<std::string> args = argv;
  if (!cwd.empty()) {
    // posix_spawn has no portable chdir action in glibc 2.36's public API for C++ users: run via
    // /bin/sh -c 'cd "$0" && exec "$@"' so the child starts in `cwd` without a shell-quoting risk.
    args.insert(args.begin(), {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", cwd});
  }
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return IoError("cannot start '" + argv[0] + "': " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (output != nullptr) {
    std::ifstream in(out_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    *output = ss.str();
    ::unlink(out_path.c_str());
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

namespace {

// ---- model loader "hf" ---------------------------------------------------------------------------
class HfLoader final : public ModelLoader {
 public:
  std::string name() const override { return "hf"; }
  Result<PreparedModel> Load(const std::string& dir) override {
    if (!fs::is_directory(dir)) return NotFound(dir + ": not a checkpoint directory");
    PreparedModel m;
    m.checkpoint_dir = dir;
    SLM_ASSIGN_OR_RETURN(m.spec, model::LoadModelSpec(dir));
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      SLM_ASSIGN_OR_RETURN(uint64_t h, HashFile(f.string()));
      m.file_hashes[f.filename().string()] = h;
    }
    if (fs::is_regular_file(fs::path(dir) / "tokenizer.model")) m.tokenizer_path = (fs::path(dir) / "tokenizer.model").string();
    return m;
  }
};

Result<std::unique_ptr<llm::Tokenizer>> LoadTokenizer(const PreparedModel& m) {
  if (m.tokenizer_path.empty()) return NotFound(m.checkpoint_dir + ": no tokenizer.model to tokenize calibration text with");
  SLM_ASSIGN_OR_RETURN(auto t, llm::SentencePieceTokenizer::FromFile(m.tokenizer_path));
  return std::unique_ptr<llm::Tokenizer>(std::move(t));
}

// ---- calibration ----------------------------------------------------------------------------------
class TextFileCalibration final : public CalibrationData {
 public:
  TextFileCalibration(std::string path, int64_t samples, int64_t length, bool jsonl, std::string field)
      : path_(std::move(path)), samples_(samples), length_(length), jsonl_(jsonl), field_(std::move(field)) {}
  std::string name() const override { return jsonl_ ? "jsonl" : "text_file"; }
  nlohmann::json Fingerprint() const override {
    auto h = HashFile(path_);
    return {{"name", name()}, {"file_xxh3", h.ok() ? HexU64(*h) : "missing"}, {"samples", samples_},
            {"length", length_}, {"field", field_}};
  }
  Result<CalibrationSet> Load(const PreparedModel& model) override {
    SLM_ASSIGN_OR_RETURN(auto tok, LoadTokenizer(model));
    SLM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path_));
    CalibrationSet set;
    set.source = path_;
    if (jsonl_) {
      std::stringstream ss(text);
      std::string line;
      int lineno = 0;
      while (std::getline(ss, line) && static_cast<int64_t>(set.samples.size()) < samples_) {
        ++lineno;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains(field_) || !j[field_].is_string()) {
          return ParseError(path_ + ":" + std::to_string(lineno) + ": expected a JSON object with a string field '" + field_ + "'");
        }
        SLM_ASSIGN_OR_RETURN(auto ids, tok->Encode(j[field_].get<std::string>()));
        if (static_cast<int64_t>(ids.size()) > length_) ids.resize(static_cast<size_t>(length_));
        set.samples.push_back(std::move(ids));
      }
    } else {
      SLM_ASSIGN_OR_RETURN(auto ids, tok->Encode(text));
      for (size_t at = 0; at + static_cast<size_t>(length_) <= ids.size() &&
                          static_cast<int64_t>(set.samples.size()) < samples_; at += static_cast<size_t>(length_)) {
        set.samples.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(at), ids.begin() + static_cast<std::ptrdiff_t>(at + length_));
      }
      if (set.samples.empty() && !ids.empty()) set.samples.push_back(ids);
    }
    if (set.samples.empty()) return InvalidArgument(path_ + ": no calibration samples in the file");
    return set;
  }

 private:
  std::string path_;
  int64_t samples_, length_;
  bool jsonl_;
  std::string field_;
};

class RandomCalibration final : public CalibrationData {
 public:
  RandomCalibration(uint64_t seed, int64_t samples, int64_t length) : seed_(seed), samples_(samples), length_(length) {}
  std::string name() const override { return "random"; }
  nlohmann::json Fingerprint() const override {
    return {{"name", "random"}, {"seed", seed_}, {"samples", samples_}, {"length", length_}};
  }
  Result<CalibrationSet> Load(const PreparedModel& model) override {
    std::mt19937_64 rng(seed_);
    CalibrationSet set;
    set.source = "random tokens, seed " + std::to_string(seed_);
    const uint64_t vocab = static_cast<uint64_t>(model.spec.vocab_size);
    for (int64_t s = 0; s < samples_; ++s) {
      std::vector<int32_t> ids(static_cast<size_t>(length_));
      for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);  // mt19937_64 output is fixed by the standard
      set.samples.push_back(std::move(ids));
    }
    return set;
  }

 private:
  uint64_t seed_;
  int64_t samples_, length_;
};

// ---- quantizer "none" ------------------------------------------------------------------------------
class NoQuantizer final : public Quantizer {
 public:
  std::string scheme() const override { return "none"; }
  nlohmann::json Fingerprint() const override { return {{"scheme", "none"}}; }
  Status Apply(model::PreparedCompile&, const CalibrationSet&, nlohmann::json*) override { return Status::Ok(); }
};

// ---- compiler "cpu" ---------------------------------------------------------------------------------
// The CPU backend's own options, parsed by the backend's parser (compilation.compiler.options).
struct CpuBackendOptions {
  int64_t max_context = 0;
  std::vector<int64_t> prefill_steps = {32};
  std::string logits = "selected";  // prefill logits: "selected" (one row) | "all"
  std::string cache_dtype = "f32";  // "f32" | "int8" (cache format kv_int8_tokenhead_v1)
};

CpuBackendOptions ParseCpuBackendOptions(Options& o) {
  CpuBackendOptions c;
  c.max_context = o.Int("max_context", 0, 0);
  c.prefill_steps = o.IntList("prefill_steps", c.prefill_steps);
  for (int64_t s : c.prefill_steps) {
    if (s < 2) o.Error("prefill_steps", "every step must be >= 2, found " + std::to_string(s));
  }
  c.logits = o.String("logits", c.logits);
  if (c.logits != "selected" && c.logits != "all") o.Error("logits", "expected \"selected\" or \"all\", found \"" + c.logits + "\"");
  Options cache = o.Child("cache");
  c.cache_dtype = cache.String("dtype", c.cache_dtype);
  if (c.cache_dtype != "f32" && c.cache_dtype != "int8") {
    cache.Error("dtype", "the cpu backend keeps KV caches in f32 or int8, found \"" + c.cache_dtype + "\"");
  }
  cache.RejectUnknown();
  o.RejectUnknown();
  return c;
}

// Wraps a constant source: counts reads for progress, and carries the crash-test hook
// (SLM_PIPELINE_TEST_KILL_AT_CONSTANT=N raises SIGKILL on the N-th read, i.e. while the
// artifact is half written).
class CountingSource final : public graph::ConstantSource {
 public:
  CountingSource(std::shared_ptr<const graph::ConstantSource> inner, std::atomic<int64_t>* reads,
                 std::function<void(int64_t)> on_read, int64_t kill_at)
      : inner_(std::move(inner)), reads_(reads), on_read_(std::move(on_read)), kill_at_(kill_at) {}
  Status Read(uint8_t* dst, uint64_t nbytes) const override {
    const int64_t n = ++*reads_;
    if (kill_at_ > 0 && n == kill_at_) ::raise(SIGKILL);
    if (on_read_) on_read_(n);
    return inner_->Read(dst, nbytes);
  }
  std::string Describe() const override { return inner_->Describe(); }

 private:
  std::shared_ptr<const graph::ConstantSource> inner_;
  std::atomic<int64_t>* reads_;
  std::function<void(int64_t)> on_read_;
  int64_t kill_at_;
};

nlohmann::json DebugRecord(const std::vector<graph::Graph>& graphs) {
  static const std::regex kLayer(R"(layers\.(\d+))");
  nlohmann::json methods = nlohmann::json::array();
  for (const graph::Graph& g : graphs) {
    nlohmann::json ops = nlohmann::json::array();
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const graph::Op& op = g.ops[i];
      nlohmann::json weights = nlohmann::json::array(), outputs = nlohmann::json::array();
      for (int32_t id : op.inputs) {
        const graph::Value& v = g.values[id];
        if (v.kind == graph::ValueKind::kConstant) {
          weights.push_back({{"name", v.name}, {"dtype", DTypeName(v.dtype)}, {"shape", v.shape}});
        }
      }
      for (int32_t id : op.outputs) {
        const graph::Value& v = g.values[id];
        outputs.push_back({{"name", v.name}, {"dtype", DTypeName(v.dtype)}, {"shape", v.shape}});
      }
      std::smatch m;
      nlohmann::json layer = nullptr;
      if (std::regex_search(op.debug, m, kLayer)) layer = std::stoll(m[1].str());
      ops.push_back({{"index", i}, {"kind", graph::OpKindName(op.kind)}, {"source", op.debug}, {"layer", layer},
                     {"weights", weights}, {"outputs", outputs}});
    }
    methods.push_back({{"method", g.name}, {"ops", ops}});
  }
  return {{"format", "staticlm-debug-record/1"}, {"methods", methods}};
}

class CpuCompiler final : public Compiler {
 public:
  explicit CpuCompiler(CpuBackendOptions o) : opt_(std::move(o)) {}
  std::string backend() const override { return "cpu"; }
  nlohmann::json Fingerprint() const override {
    return {{"backend", "cpu"}, {"max_context", opt_.max_context}, {"prefill_steps", opt_.prefill_steps},
            {"logits", opt_.logits}, {"cache_dtype", opt_.cache_dtype}};
  }

  Result<CompileResult> Compile(const CompileRequest& req) override {
    CompileResult res;
    model::CompileOptions co;
    co.max_context_len = opt_.max_context;
    co.prefill_steps = opt_.prefill_steps;
    co.logits_selected = opt_.logits == "selected";
    co.kv_cache = opt_.cache_dtype == "int8" ? model::KvCacheDType::kInt8 : model::KvCacheDType::kF32;
    auto say = [&](const std::string& s) { if (req.progress) req.progress(s); };

    SLM_ASSIGN_OR_RETURN(model::PreparedCompile prepared, model::PrepareCompile(req.model->checkpoint_dir, co));
    if (!req.reference_path.empty()) {
      // The unquantized twin, for SQNR / top-1 agreement: same graphs, no quantizer.
      SLM_ASSIGN_OR_RETURN(model::PreparedCompile ref, model::PrepareCompile(req.model->checkpoint_dir, co));
      for (graph::Graph& g : ref.graphs) SLM_RETURN_IF_ERROR(graph::PlanMemory(g));
      say("writing reference artifact " + req.reference_path);
      SLM_RETURN_IF_ERROR(model::WritePreparedArtifact(std::move(ref), req.reference_path).status());
      res.reference_path = req.reference_path;
    }
    if (req.quantizer != nullptr) {
      static const CalibrationSet kEmpty;
      SLM_RETURN_IF_ERROR(req.quantizer->Apply(prepared, req.calibration != nullptr ? *req.calibration : kEmpty,
                                                &res.quantization));
      res.pass_log.push_back("quantize:" + req.quantizer->scheme());
    }
    // Fixed order: caller passes, then the backend's own transforms, then serialization.
    for (const GraphPass& p : req.passes) {
      for (graph::Graph& g : prepared.graphs) {
        Status s = p.run(g);
        if (!s.ok()) return Status(s.code(), "graph pass '" + p.name + "' on method '" + g.name + "': " + s.message());
      }
      res.pass_log.push_back("caller:" + p.name);
    }
    for (graph::Graph& g : prepared.graphs) SLM_RETURN_IF_ERROR(graph::PlanMemory(g));
    res.pass_log.push_back("backend:plan_memory");

    // Debug record: every op → layer, weights, shapes.
    SLM_RETURN_IF_ERROR(WriteFileAtomically(req.debug_record_path, DebugRecord(prepared.graphs).dump(1)));
    res.debug_record_path = req.debug_record_path;

    // Stream the weights through counting sources (progress + crash-test hook).
    std::atomic<int64_t> reads{0};
    int64_t total = 0;
    // Test hook: SLM_PIPELINE_TEST_KILL_AT_CONSTANT=N kills at the N-th constant read;
    // "while-writing" kills at the 3rd read after the artifact's temp file exists (the writer
    // reads while lifting/hashing, then again while writing), i.e. with a half-written file.
    const char* kill_env = std::getenv("SLM_PIPELINE_TEST_KILL_AT_CONSTANT");
    int64_t kill_at = 0;
    std::function<void(int64_t)> on_read_hook;
    if (kill_env != nullptr && std::string(kill_env) == "while-writing") {
      const std::string temp = req.artifact_path + ".tmp." + std::to_string(::getpid());
      on_read_hook = [temp, seen = std::make_shared<int>(0)](int64_t) {
        struct stat sb {};
        if (::stat(temp.c_str(), &sb) == 0 && ++*seen == 3) ::raise(SIGKILL);
      };
    } else if (kill_env != nullptr) {
      kill_at = std::atoll(kill_env);
    }
    std::map<const graph::ConstantSource*, std::shared_ptr<const graph::ConstantSource>> wrapped;
    for (graph::Graph& g : prepared.graphs) {
      for (graph::Value& v : g.values) {
        if (v.kind == graph::ValueKind::kConstant && v.source) wrapped[v.source.get()];
      }
    }
    const int64_t unique = static_cast<int64_t>(wrapped.size());
    wrapped.clear();
    if (kill_env != nullptr) kill_at = std::string(kill_env) == "write-half" ? unique + unique / 2 + 1 : std::atoll(kill_env);
    for (graph::Graph& g : prepared.graphs) {
      for (graph::Value& v : g.values) {
        if (v.kind != graph::ValueKind::kConstant || !v.source) continue;
        auto& w = wrapped[v.source.get()];
        if (!w) {
          ++total;
          w = std::make_shared<CountingSource>(v.source, &reads, [&, total_ptr = &total](int64_t n) {
            if (on_read_hook) on_read_hook(n);
            if (req.progress && (n % std::max<int64_t>(1, *total_ptr / 2) == 0)) req.progress("constants read " + std::to_string(n) + " (" + std::to_string(*total_ptr) + " unique, read twice: hash + write)");
          }, kill_at);
        }
        v.source = w;
      }
    }
    say("serializing " + std::to_string(total) + " constants → " + req.artifact_path);
    res.pass_log.push_back("backend:lift_constants+serialize");
    SLM_ASSIGN_OR_RETURN(model::CompileReport rep, model::WritePreparedArtifact(std::move(prepared), req.artifact_path));
    res.artifact_path = rep.artifact_path;
    res.artifact_bytes = rep.artifact_bytes;
    res.max_context_len = rep.max_context_len;
    res.methods = rep.methods;
    return res;
  }

 private:
  CpuBackendOptions opt_;
};

// ---- evaluator "default" ---------------------------------------------------------------------------
class DefaultEvaluator final : public Evaluator {
 public:
  DefaultEvaluator(int64_t stride, int64_t max_tokens, int64_t compare_tokens)
      : stride_(stride), max_tokens_(max_tokens), compare_tokens_(compare_tokens) {}
  std::string name() const override { return "default"; }
  nlohmann::json Fingerprint() const override {
    return {{"name", "default"}, {"stride", stride_}, {"max_tokens", max_tokens_}, {"compare_tokens", compare_tokens_}};
  }
  Result<EvalResult> Evaluate(const EvalRequest& req) override {
    EvalResult r;
    SLM_ASSIGN_OR_RETURN(auto cand, llm::Runner::Load(req.artifact_path));
    std::vector<int32_t> tokens;
    if (!req.text_path.empty()) {
      SLM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(req.text_path));
      SLM_ASSIGN_OR_RETURN(tokens, cand->Encode(text));
      llm::PerplexityOptions po;
      po.stride = stride_;
      po.max_tokens = max_tokens_;
      SLM_ASSIGN_OR_RETURN(r.perplexity, llm::Perplexity(cand->session(), tokens, po));
      r.has_perplexity = true;
    }
    if (!tokens.empty()) {
      std::unique_ptr<llm::Runner> ref_holder;
      llm::Runner* ref = cand.get();
      std::unique_ptr<llm::Runner> self_twin;
      if (!req.reference_path.empty()) {
        SLM_ASSIGN_OR_RETURN(ref_holder, llm::Runner::Load(req.reference_path));
        ref = ref_holder.get();
      } else {
        // No unquantized twin (quantization off): compare against a second load of the same file.
        SLM_ASSIGN_OR_RETURN(self_twin, llm::Runner::Load(req.artifact_path));
        ref = self_twin.get();
      }
      int64_t n = std::min<int64_t>({static_cast<int64_t>(tokens.size()), compare_tokens_,
                                     cand->session().max_context_len(), ref->session().max_context_len()});
      SLM_ASSIGN_OR_RETURN(r.comparison, llm::CompareLogits(cand->session(), ref->session(),
                                                             std::span<const int32_t>(tokens).first(static_cast<size_t>(n))));
      r.has_comparison = true;
    }
    if (req.inference != nullptr && !req.inference->outputs.empty()) {
      nlohmann::json runs = nlohmann::json::array();
      for (const auto& o : req.inference->outputs) runs.push_back(o.stats.ToJson());
      r.speed = {{"device", req.inference->device}, {"runs", runs}};
    }
    return r;
  }

 private:
  int64_t stride_, max_tokens_, compare_tokens_;
};

}  // namespace

// ---- JSON of the typed results ---------------------------------------------------------------
namespace {
nlohmann::json DoubleOrInf(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
double DoubleFromJson(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>() == "-inf" ? -INFINITY : INFINITY;
  return j.is_number() ? j.get<double>() : 0.0;
}
}  // namespace

nlohmann::json EvalResult::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  if (has_perplexity) {
    j["perplexity"] = {{"perplexity", perplexity.perplexity}, {"mean_nll", perplexity.mean_nll},
                       {"tokens_scored", perplexity.tokens_scored}, {"windows", perplexity.windows},
                       {"tokens_fed", perplexity.tokens_fed}, {"ms", perplexity.ms}, {"tok_per_s", perplexity.tok_per_s}};
  }
  if (has_comparison) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : comparison.layers) layers.push_back({{"layer", l.layer}, {"sqnr_db", DoubleOrInf(l.sqnr_db)}});
    j["comparison"] = {{"tokens", comparison.tokens}, {"logits_sqnr_db", DoubleOrInf(comparison.logits_sqnr_db)},
                       {"top1_agreement", comparison.top1_agreement}, {"max_abs_diff", comparison.max_abs_diff},
                       {"layers", layers}};
  }
  if (!speed.is_null()) j["speed"] = speed;
  return j;
}

EvalResult EvalResult::FromJson(const nlohmann::json& j) {
  EvalResult r;
  if (j.contains("perplexity")) {
    const auto& p = j["perplexity"];
    r.has_perplexity = true;
    r.perplexity.perplexity = p.value("perplexity", 0.0);
    r.perplexity.mean_nll = p.value("mean_nll", 0.0);
    r.perplexity.tokens_scored = p.value("tokens_scored", int64_t{0});
    r.perplexity.windows = p.value("windows", int64_t{0});
    r.perplexity.tokens_fed = p.value("tokens_fed", int64_t{0});
    r.perplexity.ms = p.value("ms", 0.0);
    r.perplexity.tok_per_s = p.value("tok_per_s", 0.0);
  }
  if (j.contains("comparison")) {
    const auto& c = j["comparison"];
    r.has_comparison = true;
    r.comparison.tokens = c.value("tokens", int64_t{0});
    r.comparison.logits_sqnr_db = DoubleFromJson(c["logits_sqnr_db"]);
    r.comparison.top1_agreement = c.value("top1_agreement", 0.0);
    r.comparison.max_abs_diff = c.value("max_abs_diff", 0.0);
    for (const auto& l : c["layers"]) r.comparison.layers.push_back({l["layer"].get<std::string>(), DoubleFromJson(l["sqnr_db"])});
  }
  if (j.contains("speed")) r.speed = j["speed"];
  return r;
}

// ---- the built-in registry ----------------------------------------------------------------------
std::unique_ptr<DeviceRunner> MakeLocalRunner(Options& o);
std::unique_ptr<DeviceRunner> MakeProcessRunner(Options& o);
std::unique_ptr<DeviceRunner> MakeSshRunner(Options& o);

AdapterRegistry AdapterRegistry::Builtin() {
  AdapterRegistry r;
  r.model_loaders.Register("hf", [](Options& o) -> std::unique_ptr<ModelLoader> {
    o.RejectUnknown();
    return std::make_unique<HfLoader>();
  });
  auto text_like = [](bool jsonl) {
    return [jsonl](Options& o) -> std::unique_ptr<CalibrationData> {
      std::string path = o.Path("path");
      if (path.empty()) o.Error("path", "missing (required): the calibration file");
      else if (!fs::is_regular_file(path)) o.Error("path", "no such file: " + path);
      int64_t samples = o.Int("samples", 8, 1);
      int64_t length = o.Int("length", 64, 1);
      std::string field = jsonl ? o.String("field", "prompt") : "";
      o.RejectUnknown();
      return std::make_unique<TextFileCalibration>(path, samples, length, jsonl, field);
    };
  };
  r.calibration.Register("text_file", text_like(false));
  r.calibration.Register("jsonl", text_like(true));
  r.calibration.Register("random", [](Options& o) -> std::unique_ptr<CalibrationData> {
    int64_t seed = o.Int("seed", 0, 0);
    int64_t samples = o.Int("samples", 8, 1);
    int64_t length = o.Int("length", 64, 1);
    o.RejectUnknown();
    return std::make_unique<RandomCalibration>(static_cast<uint64_t>(seed), samples, length);
  });
  r.quantizers.Register("none", [](Options& o) -> std::unique_ptr<Quantizer> {
    o.RejectUnknown();
    return std::make_unique<NoQuantizer>();
  });
  RegisterQuantSchemes(r);
  r.compilers.Register("cpu", [](Options& o) -> std::unique_ptr<Compiler> {
    // The backend parses its own options (compilation.compiler.options).
    CpuBackendOptions c = ParseCpuBackendOptions(o);
    return std::make_unique<CpuCompiler>(std::move(c));
  });
  r.device_runners.Register("local", MakeLocalRunner);
  r.device_runners.Register("process", MakeProcessRunner);
  r.device_runners.Register("ssh", MakeSshRunner);
  r.evaluators.Register("default", [](Options& o) -> std::unique_ptr<Evaluator> {
    int64_t stride = o.Int("stride", 0, 0);
    int64_t max_tokens = o.Int("max_tokens", 0, 0);
    int64_t compare = o.Int("compare_tokens", 128, 1);
    o.RejectUnknown();
    return std::make_unique<DefaultEvaluator>(stride, max_tokens, compare);
  });
  r.passes["validate"] = {"validate", [](graph::Graph& g) { return g.Validate(); }};
  return r;
}

}  // namespace slm::pipeline
