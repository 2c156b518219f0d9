// Device runners: "local" (in-process), "process" (a child `staticlm device-exec` in its own
// workspace directory), "ssh" (scp/ssh to a host running `staticlm device-exec`). All three
// execute through ExecuteDeviceRequest, so the same artifact, prompt and seed give the same
// tokens everywhere.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/atomic_file.h"
#include "core/mapped_file.h"
#include "llm/runner.h"
#include "pipeline/adapters.h"
#include "runtime/program.h"

namespace slm::pipeline {
namespace fs = std::filesystem;

nlohmann::json DeviceRequest::ToJson() const {
  return {{"format", "staticlm-device-request/1"},
          {"artifact", fs::path(artifact_path).filename().string()},
          {"prompts", prompts},
          {"max_new_tokens", max_new_tokens},
          {"sampling", {{"temperature", temperature}, {"top_k", top_k}, {"top_p", top_p}, {"min_p", min_p},
                        {"repetition_penalty", repetition_penalty}, {"seed", seed}}},
          {"stop_on_eos", stop_on_eos},
          {"trace", trace}};
}

Result<DeviceRequest> DeviceRequest::FromJson(const nlohmann::json& j) {
  DeviceRequest r;
  try {
    r.artifact_path = j.at("artifact").get<std::string>();
    r.prompts = j.at("prompts").get<std::vector<std::string>>();
    r.max_new_tokens = j.value("max_new_tokens", int64_t{64});
    const auto& s = j.at("sampling");
    r.temperature = s.value("temperature", 0.0);
    r.top_k = s.value("top_k", int64_t{0});
    r.top_p = s.value("top_p", 1.0);
    r.min_p = s.value("min_p", 0.0);
    r.repetition_penalty = s.value("repetition_penalty", 1.0);
    r.seed = s.value("seed", uint64_t{0});
    r.stop_on_eos = j.value("stop_on_eos", true);
    r.trace = j.value("trace", false);
  } catch (const nlohmann::json::exception& e) {
    return ParseError(std::string("device request: ") + e.what());
  }
  return r;
}

nlohmann::json DeviceResult::ToJson() const {
  nlohmann::json outs = nlohmann::json::array();
  for (const auto& o : outputs) {
    outs.push_back({{"prompt", o.prompt}, {"prompt_ids", o.prompt_ids}, {"generated_ids", o.generated_ids},
                    {"text", o.text}, {"stop_reason", o.stop_reason}, {"stats", o.stats.ToJson()}});
  }
  return {{"format", "staticlm-device-result/1"}, {"device", device}, {"outputs", outs},
          {"has_trace", !trace_json.empty()}};
}

Result<DeviceResult> DeviceResult::FromJson(const nlohmann::json& j) {
  DeviceResult r;
  try {
    r.device = j.value("device", "");
    for (const auto& o : j.at("outputs")) {
      GenerationOutput g;
      g.prompt = o.at("prompt").get<std::string>();
      g.prompt_ids = o.at("prompt_ids").get<std::vector<int32_t>>();
      g.generated_ids = o.at("generated_ids").get<std::vector<int32_t>>();
      g.text = o.at("text").get<std::string>();
      g.stop_reason = o.at("stop_reason").get<std::string>();
      const auto& s = o.at("stats");
      g.stats.load_ms = s.value("load_ms", 0.0);
      g.stats.ttft_ms = s.value("ttft_ms", 0.0);
      g.stats.prefill_ms = s.value("prefill_ms", 0.0);
      g.stats.decode_ms = s.value("decode_ms", 0.0);
      g.stats.prompt_tokens = s.value("prompt_tokens", int64_t{0});
      g.stats.prefill_tokens_computed = s.value("prefill_tokens_computed", int64_t{0});
      g.stats.generated_tokens = s.value("generated_tokens", int64_t{0});
      g.stats.peak_rss_bytes = s.value("peak_rss_bytes", int64_t{0});
      r.outputs.push_back(std::move(g));
    }
  } catch (const nlohmann::json::exception& e) {
    return ParseError(std::string("device result: ") + e.what());
  }
  return r;
}

namespace {

// Chrome trace ("X" complete events, µs), one event per executed op, named by op kind and
// attributed to the model layer/weight through Op::debug (the debug record's "source").
class TraceObserver final : public runtime::OpObserver {
 public:
  static constexpr size_t kMaxEvents = 200000;  // bounds the file for long runs
  void OnOp(const runtime::Method& m, size_t index, const graph::Op& op, int64_t start_ns, int64_t end_ns) override {
    if (t0_ < 0) t0_ = start_ns;
    if (events_.size() >= kMaxEvents) {
      ++dropped_;
      return;
    }
    events_.push_back({{"name", std::string(graph::OpKindName(op.kind)) + " " + op.debug},
                       {"cat", m.name()},
                       {"ph", "X"},
                       {"pid", 1},
                       {"tid", 1},
                       {"ts", static_cast<double>(start_ns - t0_) / 1000.0},
                       {"dur", static_cast<double>(end_ns - start_ns) / 1000.0},
                       {"args", {{"op_index", index}, {"source", op.debug}, {"method", m.name()}}}});
  }
  std::string Json() const {
    nlohmann::json j = {{"traceEvents", events_}, {"displayTimeUnit", "ms"},
                        {"otherData", {{"producer", "staticlm"}, {"dropped_events", dropped_}}}};
    return j.dump();
  }

 private:
  int64_t t0_ = -1;
  int64_t dropped_ = 0;
  nlohmann::json events_ = nlohmann::json::array();
};

}  // namespace

Result<DeviceResult> ExecuteDeviceRequest(const DeviceRequest& req, const std::string& workdir) {
  fs::path art = req.artifact_path;
  if (art.is_relative() && !workdir.empty()) art = fs::path(workdir) / art;
  SLM_ASSIGN_OR_RETURN(auto runner, llm::Runner::Load(art.string()));
  DeviceResult result;
  TraceObserver tracer;
  for (const std::string& prompt : req.prompts) {
    runner->session().Reset();
    SLM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, runner->Encode(prompt));
    llm::GenerateOptions go;
    go.max_new_tokens = req.max_new_tokens;
    go.sampling.temperature = static_cast<float>(req.temperature);
    go.sampling.top_k = static_cast<int32_t>(req.top_k);
    go.sampling.top_p = static_cast<float>(req.top_p);
    go.sampling.min_p = static_cast<float>(req.min_p);
    go.sampling.repetition_penalty = static_cast<float>(req.repetition_penalty);
    go.sampling.seed = req.seed;
    go.stop_on_eos = req.stop_on_eos;
    std::optional<runtime::ScopedOpObserver> obs;
    if (req.trace) obs.emplace(&tracer);
    SLM_ASSIGN_OR_RETURN(llm::GenerateResult g, runner->Generate(ids, go));
    GenerationOutput o;
    o.prompt = prompt;
    o.prompt_ids = g.prompt_ids;
    o.generated_ids = g.generated;
    o.text = g.text;
    o.stop_reason = g.stop_reason;
    o.stats = g.stats;
    o.stats.load_ms = runner->load_ms();
    result.outputs.push_back(std::move(o));
  }
  if (req.trace) result.trace_json = tracer.Json();
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  result.device = std::string("cpu@") + host;
  return result;
}

namespace {

class LocalRunner final : public DeviceRunner {
 public:
  std::string name() const override { return "local"; }
  nlohmann::json Fingerprint() const override { return {{"name", "local"}}; }
  Status Push(const DeviceRequest& r) override {
    // In-process: nothing to copy; the "device" reads the artifact where it is.
    request_ = r;
    return Status::Ok();
  }
  Status Execute() override {
    auto r = ExecuteDeviceRequest(request_, "");
    if (!r.ok()) return r.status();
    result_ = std::move(r).value();
    result_.device = "local:" + result_.device;
    return Status::Ok();
  }
  Result<DeviceResult> Pull() override { return result_; }

 private:
  DeviceRequest request_;
  DeviceResult result_;
};

Status CopyFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return IoError("cannot copy " + from + " to " + to + ": " + ec.message());
  return Status::Ok();
}

Result<DeviceResult> ReadResultDir(const std::string& dir, const std::string& device) {
  SLM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(dir + "/result.json"));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return ParseError(dir + "/result.json: not valid JSON");
  SLM_ASSIGN_OR_RETURN(DeviceResult r, DeviceResult::FromJson(j));
  if (j.value("has_trace", false)) {
    SLM_ASSIGN_OR_RETURN(r.trace_json, ReadFileToString(dir + "/trace.json"));
  }
  r.device = device + ":" + r.device;
  return r;
}

// A child `staticlm device-exec` in a separate workspace directory, as a device would be.
class ProcessRunner final : public DeviceRunner {
 public:
  ProcessRunner(std::string binary, std::string workspace) : binary_(std::move(binary)), workspace_(std::move(workspace)) {}
  std::string name() const override { return "process"; }
  nlohmann::json Fingerprint() const override { return {{"name", "process"}}; }
  Status Push(const DeviceRequest& r) override {
    ws_ = workspace_.empty() ? fs::path(r.artifact_path).parent_path().string() + "/device-process" : workspace_;
    std::error_code ec;
    fs::remove_all(ws_, ec);
    fs::create_directories(ws_, ec);
    if (ec) return IoError("cannot create device workspace " + ws_ + ": " + ec.message());
    SLM_RETURN_IF_ERROR(CopyFile(r.artifact_path, ws_ + "/" + fs::path(r.artifact_path).filename().string()));
    return WriteFileAtomically(ws_ + "/request.json", r.ToJson().dump(1));
  }
  Status Execute() override {
    std::string out;
    SLM_ASSIGN_OR_RETURN(int rc, RunProcess({binary_, "device-exec", "request.json"}, &out, ws_));
    if (rc != 0) return Internal("device process '" + binary_ + " device-exec' exited with " + std::to_string(rc) + ": " + out);
    return Status::Ok();
  }
  Result<DeviceResult> Pull() override { return ReadResultDir(ws_, "process"); }

 private:
  std::string binary_, workspace_, ws_;
};

// scp/ssh to a host that has `staticlm` installed.
class SshRunner final : public DeviceRunner {
 public:
  SshRunner(std::string host, int64_t port, std::string user, std::string identity, std::string remote_dir,
            std::string binary, std::vector<std::string> ssh_options)
      : host_(std::move(host)), port_(port), user_(std::move(user)), identity_(std::move(identity)),
        remote_dir_(std::move(remote_dir)), binary_(std::move(binary)), ssh_options_(std::move(ssh_options)) {}
  std::string name() const override { return "ssh"; }
  nlohmann::json Fingerprint() const override { return {{"name", "ssh"}, {"host", host_}, {"remote_dir", remote_dir_}}; }

  Status Push(const DeviceRequest& r) override {
    local_ = fs::path(r.artifact_path).parent_path().string() + "/device-ssh";
    std::error_code ec;
    fs::remove_all(local_, ec);
    fs::create_directories(local_, ec);
    SLM_RETURN_IF_ERROR(WriteFileAtomically(local_ + "/request.json", r.ToJson().dump(1)));
    SLM_RETURN_IF_ERROR(Ssh({"mkdir", "-p", remote_dir_}));
    return Scp({r.artifact_path, local_ + "/request.json"}, Target() + ":" + remote_dir_ + "/");
  }
  Status Execute() override {
    return Ssh({"cd", Quote(remote_dir_), "&&", Quote(binary_), "device-exec", "request.json"});
  }
  Result<DeviceResult> Pull() override {
    SLM_RETURN_IF_ERROR(Scp({Target() + ":" + remote_dir_ + "/result.json"}, local_ + "/"));
    std::string probe;
    // The trace exists only when requested; fetch it if present.
    auto rc = RunProcess(SshArgv({"test", "-f", Quote(remote_dir_ + "/trace.json")}), &probe);
    if (rc.ok() && *rc == 0) SLM_RETURN_IF_ERROR(Scp({Target() + ":" + remote_dir_ + "/trace.json"}, local_ + "/"));
    return ReadResultDir(local_, "ssh:" + host_);
  }

 private:
  static std::string Quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  }
  std::string Target() const { return user_.empty() ? host_ : user_ + "@" + host_; }
  std::vector<std::string> Common(const std::string& port_flag) const {
    std::vector<std::string> a = {"-o", "BatchMode=yes", port_flag, std::to_string(port_)};
    if (!identity_.empty()) a.insert(a.end(), {"-i", identity_});
    for (const auto& o : ssh_options_) a.insert(a.end(), {"-o", o});
    return a;
  }
  std::vector<std::string> SshArgv(const std::vector<std::string>& remote) const {
    std::vector<std::string> a = {"ssh"};
    for (auto& s : Common("-p")) a.push_back(s);
    a.push_back(Target());
    std::string cmd;
    for (const auto& r : remote) cmd += (cmd.empty() ? "" : " ") + r;
    a.push_back(cmd);
    return a;
  }
  Status Ssh(const std::vector<std::string>& remote) {
    std::string out;
    SLM_ASSIGN_OR_RETURN(int rc, RunProcess(SshArgv(remote), &out));
    if (rc != 0) return IoError("ssh " + Target() + " '" + SshArgv(remote).back() + "' exited with " + std::to_string(rc) + ": " + out);
    return Status::Ok();
  }
  Status Scp(const std::vector<std::string>& from, const std::string& to) {
    std::vector<std::string> a = {"scp", "-q"};
    for (auto& s : Common("-P")) a.push_back(s);
    for (const auto& f : from) a.push_back(f);
    a.push_back(to);
    std::string out;
    SLM_ASSIGN_OR_RETURN(int rc, RunProcess(a, &out));
    if (rc != 0) return IoError("scp to/from " + Target() + " exited with " + std::to_string(rc) + ": " + out);
    return Status::Ok();
  }
  std::string host_;
  int64_t port_;
  std::string user_, identity_, remote_dir_, binary_;
  std::vector<std::string> ssh_options_;
  std::string local_;
};

std::string DefaultBinary() {
  std::string self = SelfExecutable();
  if (fs::path(self).filename() == "staticlm") return self;
  return "";
}

}  // namespace

std::unique_ptr<DeviceRunner> MakeLocalRunner(Options& o) {
  o.RejectUnknown();
  return std::make_unique<LocalRunner>();
}

std::unique_ptr<DeviceRunner> MakeProcessRunner(Options& o) {
  std::string binary = o.Path("binary", DefaultBinary());
  if (binary.empty()) o.Error("binary", "missing: the path of the staticlm executable to run as the device process");
  else if (::access(binary.c_str(), X_OK) != 0) o.Error("binary", "not an executable file: " + binary);
  std::string ws = o.Path("workspace", "");
  o.RejectUnknown();
  return std::make_unique<ProcessRunner>(binary, ws);
}

std::unique_ptr<DeviceRunner> MakeSshRunner(Options& o) {
  std::string host = o.RequiredString("host");
  int64_t port = o.Int("port", 22, 1, 65535);
  std::string user = o.String("user", "");
  std::string identity = o.Path("identity_file", "");
  if (!identity.empty() && !fs::is_regular_file(identity)) o.Error("identity_file", "no such file: " + identity);
  std::string remote_dir = o.RequiredString("remote_dir");
  std::string binary = o.String("binary", DefaultBinary());
  if (binary.empty()) o.Error("binary", "missing: the path of staticlm on the remote host");
  std::vector<std::string> ssh_options = o.StringList("ssh_options");
  o.RejectUnknown();
  return std::make_unique<SshRunner>(host, port, user, identity, remote_dir, binary, ssh_options);
}

}  // namespace slm::pipeline
