// The IOManager registry: one factory per (contract name, version). Session::Create reads the
// artifact's metadata, looks the pair up here and builds that implementation, so one runner
// core drives every contract version and an artifact of an unknown one is refused at load.
//
// Built-in managers (hf_static v1) are registered the first time the registry is used, by an
// explicit call (not a static initializer: those get dropped from static libraries). An app can
// register its own before creating sessions.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "llm/session.h"

namespace slm::llm {

using IoManagerFactory = std::function<Result<std::unique_ptr<Session>>(
    std::shared_ptr<const runtime::Program> program, const SessionOptions& options)>;

// Registers `factory` for (contract, version). InvalidArgument when the pair is taken.
Status RegisterIoManager(const std::string& contract, int64_t version, IoManagerFactory factory);

// The registered (contract, version) pairs, sorted.
std::vector<std::pair<std::string, int64_t>> RegisteredIoManagers();

// Reads "contract" and "version" from the artifact's metadata JSON and builds the registered
// manager. Unsupported, naming both and listing what is registered, when none matches.
Result<std::unique_ptr<Session>> CreateIoManager(std::shared_ptr<const runtime::Program> program,
                                                 const SessionOptions& options);

}  // namespace slm::llm
