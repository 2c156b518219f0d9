#include "llm/io_manager.h"

#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "llm/hf_static_v1.h"

namespace slm::llm {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::pair<std::string, int64_t>, IoManagerFactory> factories;
};

Registry& GetRegistry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    reg->factories[{kHfStaticContract, kHfStaticV1Version}] = &CreateHfStaticV1Session;
    return reg;
  }();
  return *r;
}

}  // namespace

Status RegisterIoManager(const std::string& contract, int64_t version, IoManagerFactory factory) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!factory) return InvalidArgument("RegisterIoManager: null factory for " + contract + " v" + std::to_string(version));
  if (!r.factories.emplace(std::make_pair(contract, version), std::move(factory)).second) {
    return InvalidArgument("an IOManager for contract '" + contract + "' version " + std::to_string(version) +
                           " is already registered");
  }
  return Status::Ok();
}

std::vector<std::pair<std::string, int64_t>> RegisteredIoManagers() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& [key, f] : r.factories) out.push_back(key);
  return out;
}

Result<std::unique_ptr<Session>> CreateIoManager(std::shared_ptr<const runtime::Program> program,
                                                 const SessionOptions& options) {
  if (!program) return InvalidArgument("CreateIoManager: null program");
  const std::string file = program->artifact().path();
  // Only the two routing fields are read here; the chosen manager parses the rest strictly.
  nlohmann::json root = nlohmann::json::parse(program->artifact().metadata_json(), nullptr, false);
  if (root.is_discarded() || !root.is_object()) return ParseError(file + ": metadata: not a JSON object");
  auto c = root.find("contract");
  auto v = root.find("version");
  if (c == root.end() || !c->is_string()) return ParseError(file + ": metadata: field 'contract': expected a string");
  if (v == root.end() || !v->is_number_integer()) return ParseError(file + ": metadata: field 'version': expected an integer");
  const std::string contract = c->get<std::string>();
  const int64_t version = v->get<int64_t>();
  IoManagerFactory factory;
  std::string known;
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find({contract, version});
    if (it != r.factories.end()) factory = it->second;
    for (const auto& [key, f] : r.factories) known += (known.empty() ? "" : ", ") + key.first + " v" + std::to_string(key.second);
  }
  if (!factory) {
    return Unsupported(file + ": no IOManager for metadata.contract '" + contract + "' metadata.version " +
                       std::to_string(version) + " (this runner implements: " + known + ")");
  }
  return factory(std::move(program), options);
}

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const runtime::Program> program,
                                                 SessionOptions options) {
  return CreateIoManager(std::move(program), options);
}

}  // namespace slm::llm
