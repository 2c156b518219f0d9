// `staticlm device-exec request.json`: the device side of the `process` and `ssh` runners.
// Reads the request in the current (workspace) directory, runs it, writes result.json (and
// trace.json when asked) next to it, atomically.
#include <cstdio>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/mapped_file.h"
#include "pipeline/adapters.h"
#include "tools/commands.h"

namespace slm::cli {

Action AddDeviceExec(CLI::App& app) {
  auto request = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("device-exec", "Execute a pipeline device request (request.json → result.json) in its directory");
  cmd->add_option("request", *request, "request JSON written by a device runner")->required();
  return [request]() {
    auto text = ReadFileToString(*request);
    if (!text.ok()) return Fail(text.status());
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded()) return Fail(ParseError(*request + ": not valid JSON"));
    auto req = pipeline::DeviceRequest::FromJson(j);
    if (!req.ok()) return Fail(req.status());
    std::string dir = std::filesystem::path(*request).parent_path().string();
    if (dir.empty()) dir = ".";
    auto res = pipeline::ExecuteDeviceRequest(*req, dir);
    if (!res.ok()) return Fail(res.status());
    if (!res->trace_json.empty()) {
      Status s = WriteFileAtomically(dir + "/trace.json", res->trace_json);
      if (!s.ok()) return Fail(s);
    }
    Status s = WriteFileAtomically(dir + "/result.json", res->ToJson().dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (!s.ok()) return Fail(s);
    return 0;
  };
}

}  // namespace slm::cli
