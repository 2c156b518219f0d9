// The hf_static v1 IOManager (docs/hf-static-v1.md): strict validation of an artifact against
// its metadata at load, then chunked prefill / decode over caches allocated from the session's
// allocator. Registered in io_manager.cc for ("hf_static", 1); use Session::Create.
#pragma once

#include <memory>

#include "llm/session.h"

namespace slm::llm {

inline constexpr const char* kHfStaticContract = "hf_static";
inline constexpr int64_t kHfStaticV1Version = 1;

Result<std::unique_ptr<Session>> CreateHfStaticV1Session(std::shared_ptr<const runtime::Program> program,
                                                         const SessionOptions& options);

}  // namespace slm::llm
