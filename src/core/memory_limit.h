// The memory limit: the most bytes that a checkpoint or artifact may make this process
// allocate for one object (a method's arena, a session's caches, a weight being converted).
// Sizes come from untrusted files, so every such allocation is checked against the limit
// *before* it happens, and refused with a message giving the need and the limit instead of
// failing in the allocator (or being killed by the OOM killer).
//
// The limit is, in order: SetMemoryLimitBytes() (the CLI's --memory-limit), the environment
// variable SLM_MEMORY_LIMIT (bytes, or with a K/M/G/T suffix, powers of 1024), or the physical
// RAM of the machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace slm {

uint64_t MemoryLimitBytes();
// Overrides the limit for this process (0 restores the default).
void SetMemoryLimitBytes(uint64_t bytes);
// "512M" → 536870912; std::nullopt for anything that is not a byte count.
std::optional<uint64_t> ParseByteSize(std::string_view text);

// OK when `need` bytes fit in the limit; otherwise ResourceExhausted:
// "<what> needs 1.50 GiB (1610612736 bytes), more than the memory limit of 1.00 GiB
//  (1073741824 bytes; set by SLM_MEMORY_LIMIT or --memory-limit)".
Status CheckMemoryNeed(uint64_t need, const std::string& what);

// Adds `b` to `*sum`; false (and *sum unchanged) on overflow of uint64.
inline bool AddBytes(uint64_t* sum, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(*sum, b, &r)) return false;
  *sum = r;
  return true;
}

}  // namespace slm
