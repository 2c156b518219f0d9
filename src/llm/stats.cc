#include "llm/stats.h"

#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include <cstdio>

namespace slm::llm {
namespace {

double Rate(int64_t tokens, double ms) {
  if (tokens <= 0 || ms <= 0) return 0.0;
  return static_cast<double>(tokens) * 1000.0 / ms;
}

}  // namespace

double GenerationStats::prefill_tok_per_s() const { return Rate(prompt_tokens, prefill_ms); }

double GenerationStats::decode_tok_per_s() const { return Rate(decode_calls(), decode_ms); }

std::string GenerationStats::ToText() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "load %.1f ms | ttft %.1f ms | prefill %.1f tok/s (%lld tok) | "
                "decode %.1f tok/s (%lld tok) | peak RSS %.1f MiB",
                load_ms, ttft_ms, prefill_tok_per_s(), static_cast<long long>(prompt_tokens),
                decode_tok_per_s(), static_cast<long long>(decode_calls()),
                static_cast<double>(peak_rss_bytes) / (1024.0 * 1024.0));
  return buf;
}

nlohmann::json GenerationStats::ToJson() const {
  return nlohmann::json{
      {"load_ms", load_ms},
      {"ttft_ms", ttft_ms},
      {"prefill_ms", prefill_ms},
      {"decode_ms", decode_ms},
      {"prompt_tokens", prompt_tokens},
      {"prefill_tokens_computed", prefill_tokens_computed},
      {"generated_tokens", generated_tokens},
      {"peak_rss_bytes", peak_rss_bytes},
      {"prefill_tok_per_s", prefill_tok_per_s()},
      {"decode_tok_per_s", decode_tok_per_s()},
  };
}

int64_t PeakRssBytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  // Linux reports KiB (macOS would report bytes; not a target yet).
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace slm::llm
