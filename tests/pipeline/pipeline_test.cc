// The pipeline: config validation (every problem at once, with lines), injection through the
// public path, the demo config end to end, resume / re-run rules, reproducibility, crash safety,
// device runners, debug record and trace.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "llm/evaluation.h"
#include "llm/runner.h"
#include "pipeline/pipeline.h"
#include "pipeline_test_util.h"
#include "test_util.h"

namespace slm::pipeline {
namespace {
namespace fs = std::filesystem;
using slm::testing::MakeTempDir;
using slm::testing::Quiet;
using slm::testing::ReadFile;
using slm::testing::ReadJson;
using slm::testing::SourceDir;
using slm::testing::WriteFile;

// The shipped demo config, with its output redirected into a fresh temp dir.
ConfigDoc DemoConfig(const std::string& artifact_dir, int64_t max_new_tokens = 24) {
  auto doc = LoadYamlConfig(SourceDir() + "/configs/stories260k.yaml");
  EXPECT_TRUE(doc.ok()) << doc.status().ToString();
  ConfigDoc d = std::move(doc).value();
  d.root["artifact_dir"] = artifact_dir;
  d.root["stages"]["inference"]["max_new_tokens"] = max_new_tokens;
  d.root["stages"]["evaluation"]["evaluator"]["options"]["max_tokens"] = 200;
  d.root["stages"]["evaluation"]["evaluator"]["options"]["compare_tokens"] = 48;
  return d;
}

std::map<std::string, std::string> Statuses(const RunReport& r) {
  std::map<std::string, std::string> m;
  for (const auto& s : r.stages) m[StageName(s.stage)] = s.status;
  return m;
}

// ---- config validation ------------------------------------------------------------------------

TEST(PipelineConfig, ReportsEveryProblemAtOnceWithKeyAndLine) {
  const std::string yaml =
      "name: bad\n"                                   // 1
      "model:\n"                                      // 2
      "  path: /nonexistent/checkpoint\n"             // 3
      "artifact_dir: /tmp/x\n"                        // 4
      "prompts: [hi]\n"                               // 5
      "stages:\n"                                     // 6
      "  compilation:\n"                              // 7
      "    compiler:\n"                               // 8
      "      name: cpu\n"                             // 9
      "      options:\n"                              // 10
      "        max_context: lots\n"                   // 11
      "  inference:\n"                                // 12
      "    runner: locla\n";                          // 13
  auto doc = ParseYamlConfig(yaml, "bad.yaml", "/");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto p = Pipeline::FromConfig(*doc);
  ASSERT_FALSE(p.ok());
  const std::string& m = p.status().message();
  EXPECT_NE(m.find("bad.yaml:3: model.path: no such checkpoint directory"), std::string::npos) << m;
  EXPECT_NE(m.find("bad.yaml:11: stages.compilation.compiler.options.max_context: expected an integer, found a string \"lots\""),
            std::string::npos) << m;
  EXPECT_NE(m.find("bad.yaml:13: stages.inference.runner: unknown adapter 'locla' (known: local, process, ssh)"),
            std::string::npos) << m;
}

TEST(PipelineConfig, TypoInAdapterNameFailsBeforeAnyStageRuns) {
  const std::string dir = MakeTempDir("pipe-typo");
  ConfigDoc d = DemoConfig(dir + "/out");
  d.root["stages"]["quantization"]["quantizer"] = "nnoe";
  d.lines["stages.quantization.quantizer"] = 17;
  auto p = Pipeline::FromConfig(d);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find(":17: stages.quantization.quantizer: unknown adapter 'nnoe'"), std::string::npos)
      << p.status().message();
  EXPECT_FALSE(fs::exists(dir + "/out")) << "nothing may run (or be created) for an invalid config";
}

TEST(PipelineConfig, MissingModelPathAndUnknownKeyAreNamed) {
  auto doc = ParseYamlConfig("artifact_dir: /tmp/x\nprompts: [a]\nstages:\n  inference:\n    max_new_tokns: 3\n", "c.yaml", "/");
  ASSERT_TRUE(doc.ok());
  auto p = Pipeline::FromConfig(*doc);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("model: missing (required)"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("c.yaml:5: stages.inference.max_new_tokns: unknown key"), std::string::npos)
      << p.status().message();
}

TEST(PipelineConfig, QuotedNumbersStayStringsAndPlainOnesBecomeNumbers) {
  auto doc = ParseYamlConfig("a: 3\nb: '3'\nc: 2.5\nd: true\n", "t.yaml", ".");
  ASSERT_TRUE(doc.ok());
  EXPECT_TRUE(doc->root["a"].is_number_integer());
  EXPECT_TRUE(doc->root["b"].is_string());
  EXPECT_TRUE(doc->root["c"].is_number_float());
  EXPECT_TRUE(doc->root["d"].is_boolean());
  EXPECT_EQ(doc->lines["c"], 3);
}

TEST(PipelineConfig, InvalidYamlNamesTheLine) {
  auto doc = ParseYamlConfig("a: 1\nb: [1, 2\n", "broken.yaml", ".");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("broken.yaml:"), std::string::npos) << doc.status().message();
}

// ---- errors -------------------------------------------------------------------------------------

TEST(StageErrorTest, NamesTheStageAndIsNeverWrappedTwice) {
  Status cause = NotFound("tensor 'x' missing");
  Status once = WrapStageError(StageId::kCompilation, cause);
  EXPECT_EQ(once.code(), ErrorCode::kNotFound);
  EXPECT_EQ(once.message(), "stage 'compilation' failed: tensor 'x' missing");
  Status twice = WrapStageError(StageId::kEvaluation, once);
  EXPECT_EQ(twice.message(), once.message());
}

// ---- injection through the public path ----------------------------------------------------------

class RecordingQuantizer final : public Quantizer {
 public:
  std::vector<std::string>* log;
  explicit RecordingQuantizer(std::vector<std::string>* l) : log(l) {}
  std::string scheme() const override { return "test"; }
  nlohmann::json Fingerprint() const override { return {{"scheme", "test"}}; }
  Status Apply(model::PreparedCompile& prepared, const CalibrationSet& c, nlohmann::json*) override {
    log->push_back("quantize(" + std::to_string(prepared.graphs.size()) + " graphs, " + std::to_string(c.samples.size()) + " samples)");
    return Status::Ok();
  }
};

class FailingEvaluator final : public Evaluator {
 public:
  std::string name() const override { return "failing"; }
  nlohmann::json Fingerprint() const override { return {{"name", "failing"}}; }
  Result<EvalResult> Evaluate(const EvalRequest&) override { return Internal("evaluator exploded"); }
};

TEST(PipelineInjection, InjectedAdaptersAndPassesRunThroughFromConfigInTheFixedOrder) {
  const std::string dir = MakeTempDir("pipe-inject");
  ConfigDoc d = DemoConfig(dir);
  d.root["stages"]["inference"]["enabled"] = false;
  d.root["stages"]["evaluation"]["enabled"] = false;
  std::vector<std::string> log;
  AdapterOverrides ov;
  ov.quantizer = std::make_shared<RecordingQuantizer>(&log);
  bool saw_unplanned = false;
  ov.passes.push_back({"check_unplanned", [&](graph::Graph& g) {
                         // Caller passes run before the backend's memory planning.
                         for (const auto& v : g.values) {
                           if (v.kind == graph::ValueKind::kIntermediate && v.arena_offset >= 0) return Internal("already planned");
                         }
                         saw_unplanned = true;
                         log.push_back("caller pass on " + g.name);
                         return Status::Ok();
                       }});
  auto p = Pipeline::FromConfig(d, ov);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto r = (*p)->Run(Quiet());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(saw_unplanned);
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0], "quantize(2 graphs, 4 samples)");
  const auto& pl = r->state.compiled->pass_log;
  ASSERT_EQ(pl.size(), 5u) << nlohmann::json(pl).dump();
  EXPECT_EQ(pl[0], "quantize:test");
  EXPECT_EQ(pl[1], "caller:validate");        // the config's named pass
  EXPECT_EQ(pl[2], "caller:check_unplanned");  // the injected one
  EXPECT_EQ(pl[3], "backend:plan_memory");
  EXPECT_EQ(pl[4], "backend:lift_constants+serialize");
  EXPECT_TRUE(fs::exists(dir + "/reference.slm")) << "a quantizing scheme also writes the unquantized reference";
}

TEST(PipelineInjection, RegisteredFactoryIsSelectedByNameAndStageErrorNamesTheStage) {
  const std::string dir = MakeTempDir("pipe-registry");
  AdapterRegistry reg = AdapterRegistry::Builtin();
  reg.evaluators.Register("failing", [](Options& o) -> std::unique_ptr<Evaluator> {
    o.RejectUnknown();
    return std::make_unique<FailingEvaluator>();
  });
  ConfigDoc d = DemoConfig(dir);
  d.root["stages"]["evaluation"]["evaluator"] = "failing";
  d.root["stages"]["inference"]["enabled"] = false;
  AdapterOverrides ov;
  ov.registry = &reg;
  auto p = Pipeline::FromConfig(d, ov);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->adapters().evaluator->name(), "failing");
  auto r = (*p)->Run(Quiet());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "stage 'evaluation' failed: evaluator exploded");
  ASSERT_TRUE((*p)->last_error().has_value());
  EXPECT_EQ((*p)->last_error()->stage, StageId::kEvaluation);
}

// ---- the demo config end to end, resume rules ------------------------------------------------------

TEST(PipelineRun, DemoConfigRunsAllStagesThenReusesThemAndRerunsOnlyDownstreamOfAChange) {
  const std::string dir = MakeTempDir("pipe-demo");
  ConfigDoc d = DemoConfig(dir);
  {
    auto p = Pipeline::FromConfig(d);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    auto r = (*p)->Run(Quiet());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (const auto& s : r->stages) EXPECT_EQ(s.status, "ran") << StageName(s.stage);
    const auto& st = r->state;
    ASSERT_TRUE(st.inference.has_value());
    ASSERT_EQ(st.inference->outputs.size(), 1u);
    EXPECT_FALSE(st.inference->outputs[0].text.empty());
    EXPECT_GT(st.inference->outputs[0].stats.decode_tok_per_s(), 0);
    ASSERT_TRUE(st.evaluation.has_value());
    EXPECT_TRUE(st.evaluation->has_perplexity);
    EXPECT_GT(st.evaluation->perplexity.perplexity, 1.0);
    EXPECT_LT(st.evaluation->perplexity.perplexity, 512.0) << "worse than uniform over the vocabulary";
    EXPECT_TRUE(st.evaluation->has_comparison);
    // The demo quantizes to int8: compared with the unquantized reference.slm.
    EXPECT_TRUE(std::isfinite(st.evaluation->comparison.logits_sqnr_db));
    EXPECT_GT(st.evaluation->comparison.logits_sqnr_db, 10.0);
    EXPECT_GT(st.evaluation->comparison.top1_agreement, 0.8);
    EXPECT_EQ(st.evaluation->comparison.layers.size(), 5u);
    EXPECT_TRUE(fs::exists(dir + "/reference.slm"));
    nlohmann::json rep = ReadJson(dir + "/report.json");
    EXPECT_TRUE(rep["evaluation"].contains("perplexity"));
    EXPECT_TRUE(rep["inference"]["generations"][0].contains("text"));
    const std::string html = ReadFile(dir + "/report.html");
    EXPECT_NE(html.find("<svg"), std::string::npos);
    EXPECT_NE(html.find("perplexity"), std::string::npos);
    EXPECT_EQ(html.find("<script src"), std::string::npos) << "self-contained";
  }
  {  // Nothing changed: every stage reused, and no output rewritten (the speed of a reused run
     // is measured by the demo, not asserted here).
    std::map<std::string, fs::file_time_type> before;
    for (const auto& e : fs::directory_iterator(dir)) if (e.is_regular_file()) before[e.path().filename().string()] = e.last_write_time();
    ASSERT_TRUE(before.count("reference.slm"));
    auto p = Pipeline::FromConfig(d);
    ASSERT_TRUE(p.ok());
    auto r = (*p)->Run(Quiet());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (const auto& s : r->stages) EXPECT_EQ(s.status, "reused") << StageName(s.stage);
    for (const auto& [name, t] : before) {
      if (name == "manifest.json" || name.rfind("report", 0) == 0) continue;  // records of the run itself
      EXPECT_EQ(fs::last_write_time(dir + "/" + name), t) << name << " was rewritten by a reused run";
    }
    ASSERT_TRUE(r->state.evaluation.has_value());
    EXPECT_TRUE(r->state.evaluation->has_perplexity);
  }
  {  // One inference option changed: only inference and evaluation re-run.
    d.root["stages"]["inference"]["max_new_tokens"] = 8;
    auto p = Pipeline::FromConfig(d);
    ASSERT_TRUE(p.ok());
    auto r = (*p)->Run(Quiet());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto st = Statuses(*r);
    EXPECT_EQ(st["model_preparation"], "reused");
    EXPECT_EQ(st["quantization"], "reused");
    EXPECT_EQ(st["compilation"], "reused");
    EXPECT_EQ(st["inference"], "ran");
    EXPECT_EQ(st["evaluation"], "ran");
  }
  {  // A compile option changed: compilation and everything after.
    d.root["stages"]["compilation"]["compiler"]["options"]["prefill_steps"] = nlohmann::json::array({16});
    auto p = Pipeline::FromConfig(d);
    ASSERT_TRUE(p.ok());
    auto r = (*p)->Run(Quiet());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto st = Statuses(*r);
    EXPECT_EQ(st["quantization"], "reused");
    EXPECT_EQ(st["compilation"], "ran");
    EXPECT_EQ(st["inference"], "ran");
  }
  {  // --force re-runs all; --only runs just one stage.
    auto p = Pipeline::FromConfig(d);
    ASSERT_TRUE(p.ok());
    RunOptions o = Quiet();
    o.force = true;
    auto r = (*p)->Run(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (const auto& s : r->stages) EXPECT_EQ(s.status, "ran") << StageName(s.stage);
    RunOptions only = Quiet();
    only.only = StageId::kInference;
    auto r2 = (*p)->Run(only);
    ASSERT_TRUE(r2.ok()) << r2.status().ToString();
    auto st = Statuses(*r2);
    EXPECT_EQ(st["compilation"], "reused");
    EXPECT_EQ(st["inference"], "ran");
    EXPECT_EQ(st["evaluation"], "not selected");
  }
}

TEST(PipelineRun, SameInputsGiveAByteIdenticalArtifact) {
  const std::string a = MakeTempDir("pipe-repro-a"), b = MakeTempDir("pipe-repro-b");
  for (const auto& dir : {a, b}) {
    ConfigDoc d = DemoConfig(dir);
    d.root["stages"]["inference"]["enabled"] = false;
    d.root["stages"]["evaluation"]["enabled"] = false;
    auto p = Pipeline::FromConfig(d);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_TRUE((*p)->Run(Quiet()).ok());
  }
  const std::string x = ReadFile(a + "/model.slm"), y = ReadFile(b + "/model.slm");
  ASSERT_GT(x.size(), 4096u);
  EXPECT_TRUE(x == y) << "artifacts differ";
  EXPECT_EQ(ReadFile(a + "/debug.json"), ReadFile(b + "/debug.json"));
}

TEST(PipelineRun, DebugRecordMapsOpsToLayersAndWeightsAndTraceIsChromeJson) {
  const std::string dir = MakeTempDir("pipe-debug");
  ConfigDoc d = DemoConfig(dir, 4);
  d.root["stages"]["evaluation"]["enabled"] = false;
  d.root["stages"]["quantization"]["quantizer"] = "none";  // f32 matmuls: one weight each
  auto p = Pipeline::FromConfig(d);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto r = (*p)->Run(Quiet());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  nlohmann::json dbg = ReadJson(dir + "/debug.json");
  bool found = false;
  for (const auto& m : dbg["methods"]) {
    if (m["method"] != "decode") continue;
    for (const auto& op : m["ops"]) {
      if (op["source"] == "model.layers.1.self_attn.q_proj") {
        found = true;
        EXPECT_EQ(op["kind"], graph::OpKindName(graph::OpKind::kMatMul));
        EXPECT_EQ(op["layer"], 1);
        ASSERT_EQ(op["weights"].size(), 1u);
        EXPECT_EQ(op["weights"][0]["name"], "model.layers.1.self_attn.q_proj.weight");
        EXPECT_EQ(op["weights"][0]["shape"].size(), 2u);
        EXPECT_EQ(op["outputs"][0]["shape"][0], 1);
      }
    }
  }
  EXPECT_TRUE(found);
  nlohmann::json trace = ReadJson(dir + "/trace.json");
  ASSERT_GT(trace["traceEvents"].size(), 10u);
  const auto& ev = trace["traceEvents"][0];
  EXPECT_EQ(ev["ph"], "X");
  EXPECT_TRUE(ev.contains("ts") && ev.contains("dur") && ev["args"].contains("source"));
}

// ---- crash safety -------------------------------------------------------------------------------

std::string WriteConfigFile(const std::string& dir, const std::string& out_dir, const std::string& extra_inference = "") {
  const std::string src = SourceDir();
  std::string yaml = "name: t\nmodel: " + src + "/models/stories260K\nartifact_dir: " + out_dir +
                     "\nprompts: [\"Once upon a time\"]\nstages:\n  compilation:\n    compiler: {name: cpu, options: {max_context: 128}}\n"
                     "  inference:\n    max_new_tokens: 8\n" + extra_inference +
                     "  evaluation:\n    enabled: false\n";
  WriteFile(dir + "/config.yaml", yaml);
  return dir + "/config.yaml";
}

TEST(PipelineCrash, KillDuringCompilationLeavesNoFinishedLookingArtifactAndNextRunCompletes) {
  const std::string dir = MakeTempDir("pipe-kill");
  const std::string out = dir + "/out";
  const std::string cfg = WriteConfigFile(dir, out);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("SLM_PIPELINE_TEST_KILL_AT_CONSTANT", "while-writing", 1);
    const std::string cli = slm::testing::CliPath();
    ::execl(cli.c_str(), cli.c_str(), "pipeline", "run", "-q", cfg.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the hook should have killed the child mid-compilation";
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_FALSE(fs::exists(out + "/model.slm")) << "a killed compilation must not leave the final artifact name";
  bool temp_left = false;
  for (const auto& e : fs::directory_iterator(out)) temp_left |= e.path().filename().string().find(".tmp.") != std::string::npos;
  EXPECT_TRUE(temp_left) << "expected the half-written temp file (proves the kill happened while writing)";
  nlohmann::json manifest = ReadJson(out + "/manifest.json");
  EXPECT_FALSE(manifest["stages"].contains("compilation"));

  auto p = Pipeline::FromYamlFile(cfg);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto r = (*p)->Run(Quiet());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto st = Statuses(*r);
  EXPECT_EQ(st["model_preparation"], "reused");
  EXPECT_EQ(st["compilation"], "ran");
  EXPECT_TRUE(fs::exists(out + "/model.slm"));
  for (const auto& e : fs::directory_iterator(out)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "stale temp file " << e.path();
  }
  EXPECT_TRUE(llm::Runner::Load(out + "/model.slm").ok());
}

// ---- device runners -------------------------------------------------------------------------------

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool PortOpen(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

// A real sshd on loopback, as the current user, with its own host key and authorized_keys.
struct LoopbackSshd {
  std::string dir, client_key;
  int port = 0;
  pid_t pid = -1;
  std::string error;
  LoopbackSshd() {
    dir = MakeTempDir("sshd");
    port = FreePort();
    client_key = dir + "/client_key";
    std::string out;
    for (const std::string& k : {dir + "/host_key", client_key}) {
      auto rc = RunProcess({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k}, &out);
      if (!rc.ok() || *rc != 0) {
        error = "ssh-keygen failed: " + out;
        return;
      }
    }
    fs::copy_file(client_key + ".pub", dir + "/authorized_keys");
    ::chmod((dir + "/authorized_keys").c_str(), 0600);
    if (::geteuid() == 0) fs::create_directories("/run/sshd");  // privilege separation dir
    WriteFile(dir + "/sshd_config", "ListenAddress 127.0.0.1\nHostKey " + dir + "/host_key\nAuthorizedKeysFile " + dir +
                                        "/authorized_keys\nPidFile " + dir + "/sshd.pid\nStrictModes no\nUsePAM no\n"
                                        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                                        "Subsystem sftp internal-sftp\n");
    pid = ::fork();
    if (pid == 0) {
      const std::string p = std::to_string(port), cfg = dir + "/sshd_config", log = dir + "/sshd.log";
      ::execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-f", cfg.c_str(), "-p", p.c_str(), "-E", log.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 100 && !PortOpen(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!PortOpen(port)) error = "sshd did not start: " + ReadFile(dir + "/sshd.log");
  }
  ~LoopbackSshd() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

Result<DeviceResult> RunWith(const AdapterFactory<DeviceRunner>& f, nlohmann::json opts, const DeviceRequest& req) {
  ConfigDoc doc;
  Diagnostics diag(&doc);
  Options o(&opts, "runner.options", &diag, ".");
  auto runner = f(o);
  SLM_RETURN_IF_ERROR(diag.ToStatus("runner options"));
  return runner->Run(req);
}

TEST(DeviceRunners, LocalProcessAndSshGiveIdenticalTokensForTheSameArtifactPromptAndSeed) {
  const std::string dir = MakeTempDir("pipe-devices");
  ConfigDoc d = DemoConfig(dir);
  d.root["stages"]["inference"]["enabled"] = false;
  d.root["stages"]["evaluation"]["enabled"] = false;
  auto p = Pipeline::FromConfig(d);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto r = (*p)->Run(Quiet());
  ASSERT_TRUE(r.ok()) << r.status().ToString();

  DeviceRequest req;
  req.artifact_path = dir + "/model.slm";
  req.prompts = {"Once upon a time", "Lily and Tom"};
  req.max_new_tokens = 20;
  req.temperature = 0.8;
  req.top_p = 0.9;
  req.seed = 42;
  req.trace = true;
  AdapterRegistry reg = AdapterRegistry::Builtin();
  auto local = RunWith(*reg.device_runners.Find("local"), nlohmann::json::object(), req);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  auto proc = RunWith(*reg.device_runners.Find("process"), {{"binary", slm::testing::CliPath()}}, req);
  ASSERT_TRUE(proc.ok()) << proc.status().ToString();
  ASSERT_EQ(local->outputs.size(), 2u);
  ASSERT_EQ(proc->outputs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(local->outputs[i].generated_ids, proc->outputs[i].generated_ids);
    EXPECT_EQ(local->outputs[i].text, proc->outputs[i].text);
    EXPECT_FALSE(local->outputs[i].generated_ids.empty());
  }
  EXPECT_FALSE(proc->trace_json.empty()) << "the trace is pulled back from the device";
  EXPECT_NE(proc->device.find("process:"), std::string::npos);

  if (!fs::exists("/usr/sbin/sshd")) {
    GTEST_SKIP() << "SKIPPED the ssh runner: /usr/sbin/sshd is not installed (apt-get install openssh-server; scripts/setup.sh does)";
  }
  LoopbackSshd sshd;
  ASSERT_TRUE(sshd.error.empty()) << sshd.error;
  nlohmann::json ssh_opts = {{"host", "127.0.0.1"}, {"port", sshd.port}, {"identity_file", sshd.client_key},
                             {"remote_dir", MakeTempDir("ssh-remote") + "/ws"}, {"binary", slm::testing::CliPath()},
                             {"ssh_options", {"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR"}}};
  auto ssh = RunWith(*reg.device_runners.Find("ssh"), ssh_opts, req);
  ASSERT_TRUE(ssh.ok()) << ssh.status().ToString() << "\nsshd log: " << ReadFile(sshd.dir + "/sshd.log");
  ASSERT_EQ(ssh->outputs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(local->outputs[i].generated_ids, ssh->outputs[i].generated_ids);
  EXPECT_FALSE(ssh->trace_json.empty());
}

// ---- evaluation library -----------------------------------------------------------------------------

// Adds deterministic noise to a constant's bytes (a stand-in for quantization error).
class NoisySource final : public graph::ConstantSource {
 public:
  explicit NoisySource(std::shared_ptr<const graph::ConstantSource> in) : in_(std::move(in)) {}
  Status Read(uint8_t* dst, uint64_t n) const override {
    SLM_RETURN_IF_ERROR(in_->Read(dst, n));
    float* f = reinterpret_cast<float*>(dst);
    for (uint64_t i = 0; i < n / 4; ++i) f[i] *= 1.0f + 0.02f * static_cast<float>(static_cast<int>(i % 7) - 3) / 3.0f;
    return Status::Ok();
  }
  std::string Describe() const override { return "noisy " + in_->Describe(); }

 private:
  std::shared_ptr<const graph::ConstantSource> in_;
};

TEST(Evaluation, PerturbedWeightsGiveFiniteSqnrPerLayerAndPerplexityUsesStridedWindows) {
  const std::string clean = MakeTempDir("pipe-eval-a"), noisy = MakeTempDir("pipe-eval-b");
  for (const auto& dir : {clean, noisy}) {
    ConfigDoc d = DemoConfig(dir);
    d.root["stages"]["inference"]["enabled"] = false;
    d.root["stages"]["evaluation"]["enabled"] = false;
    d.root["stages"]["quantization"]["quantizer"] = "none";  // the noise pass needs f32 constants
    AdapterOverrides ov;
    if (dir == noisy) {
      ov.passes.push_back({"noise", [](graph::Graph& g) {
                             for (auto& v : g.values) {
                               if (v.kind == graph::ValueKind::kConstant && v.name.find("layers.2.mlp") != std::string::npos) {
                                 v.source = std::make_shared<NoisySource>(v.source);
                               }
                             }
                             return Status::Ok();
                           }});
    }
    auto p = Pipeline::FromConfig(d, ov);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_TRUE((*p)->Run(Quiet()).ok());
  }
  auto a = llm::Runner::Load(clean + "/model.slm");
  auto b = llm::Runner::Load(noisy + "/model.slm");
  ASSERT_TRUE(a.ok() && b.ok());
  auto text = ReadFileToString(SourceDir() + "/data/tinystories_sample.txt");
  ASSERT_TRUE(text.ok());
  auto ids = (*a)->Encode(*text);
  ASSERT_TRUE(ids.ok());
  auto cmp = llm::CompareLogits((*b)->session(), (*a)->session(), std::span<const int32_t>(*ids).first(64));
  ASSERT_TRUE(cmp.ok()) << cmp.status().ToString();
  ASSERT_EQ(cmp->layers.size(), 5u);
  EXPECT_TRUE(std::isinf(cmp->layers[0].sqnr_db)) << "layers before the noise are identical";
  EXPECT_TRUE(std::isinf(cmp->layers[1].sqnr_db));
  EXPECT_TRUE(std::isfinite(cmp->layers[2].sqnr_db));
  EXPECT_GT(cmp->layers[2].sqnr_db, 10.0);
  EXPECT_TRUE(std::isfinite(cmp->logits_sqnr_db));
  EXPECT_GT(cmp->top1_agreement, 0.5);
  EXPECT_LE(cmp->top1_agreement, 1.0);

  // Strided windows. stride == window: no overlap, and each window's first token has no context
  // inside its window, so it is not scored (as in HF's strided evaluation): 299 - 4 windows.
  // A smaller stride scores every token but the text's first, with more context per token, so
  // perplexity does not get worse (beyond noise).
  llm::PerplexityOptions full;
  full.window = 64;
  full.stride = 64;
  full.max_tokens = 300;
  auto p1 = llm::Perplexity((*a)->session(), *ids, full);
  ASSERT_TRUE(p1.ok()) << p1.status().ToString();
  EXPECT_EQ(p1->tokens_scored, 295);
  EXPECT_EQ(p1->windows, 5);
  llm::PerplexityOptions strided = full;
  strided.stride = 16;
  auto p2 = llm::Perplexity((*a)->session(), *ids, strided);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->tokens_scored, 299);
  EXPECT_GT(p2->windows, p1->windows);
  EXPECT_LT(p2->perplexity, p1->perplexity * 1.02);
  llm::PerplexityOptions bad = full;
  bad.stride = 65;
  EXPECT_FALSE(llm::Perplexity((*a)->session(), *ids, bad).ok());
}

}  // namespace
}  // namespace slm::pipeline
