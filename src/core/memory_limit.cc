#include "core/memory_limit.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace slm {
namespace {

std::atomic<uint64_t> g_override{0};

uint64_t PhysicalRamBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return UINT64_MAX;  // unknown: no limit beyond the allocator's
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

std::string Human(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%llu bytes", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f %s (%llu bytes)", v, units[u],
                  static_cast<unsigned long long>(bytes));
  }
  return buf;
}

}  // namespace

std::optional<uint64_t> ParseByteSize(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, static_cast<uint64_t>(text[i] - '0'), &value)) {
      return std::nullopt;
    }
  }
  if (i == 0) return std::nullopt;
  uint64_t scale = 1;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k': case 'K': scale = 1ull << 10; break;
      case 'm': case 'M': scale = 1ull << 20; break;
      case 'g': case 'G': scale = 1ull << 30; break;
      case 't': case 'T': scale = 1ull << 40; break;
      default: return std::nullopt;
    }
    ++i;
    if (i < text.size() && (text[i] == 'i' || text[i] == 'I')) ++i;   // "MiB"
    if (i < text.size() && (text[i] == 'b' || text[i] == 'B')) ++i;   // "MB"
    if (i != text.size()) return std::nullopt;
  }
  if (__builtin_mul_overflow(value, scale, &value)) return std::nullopt;
  return value;
}

uint64_t MemoryLimitBytes() {
  if (uint64_t o = g_override.load(std::memory_order_relaxed)) return o;
  if (const char* env = std::getenv("SLM_MEMORY_LIMIT")) {
    if (auto v = ParseByteSize(env); v && *v > 0) return *v;
  }
  static const uint64_t ram = PhysicalRamBytes();
  return ram;
}

void SetMemoryLimitBytes(uint64_t bytes) { g_override.store(bytes, std::memory_order_relaxed); }

Status CheckMemoryNeed(uint64_t need, const std::string& what) {
  const uint64_t limit = MemoryLimitBytes();
  if (need <= limit) return Status::Ok();
  return ResourceExhausted(what + " needs " + Human(need) + ", more than the memory limit of " +
                           Human(limit) + "; set by SLM_MEMORY_LIMIT or --memory-limit");
}

}  // namespace slm
