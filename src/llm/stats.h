// Generation statistics: what the runner measures for one generate call, and the helpers it
// measures with.
//
// Timeline of one generate call (what each field covers):
//   load_ms    artifact + tokenizer load (0 when reusing a loaded model)
//   prefill_ms all prefill chunks over the prompt, ending when the first logits are ready
//   ttft_ms    from the start of generate (tokenize included) to the first generated token
//              being sampled: tokenize + prefill + first sample
//   decode_ms  all decode calls after the first token (each eats the previous token, returns
//              logits for the next) plus sampling
//
// Rates:
//   prefill_tok_per_s = prompt_tokens / prefill_ms. Prompt tokens, not the computed ones:
//     padding of the last static chunk is overhead, not throughput, and reused cache entries
//     (prompt_tokens - prefill_tokens_computed) are what a cache is for.
//   decode_tok_per_s  = (generated_tokens - 1) / decode_ms. The first generated token comes
//     from prefill logits, so n generated tokens cost n - 1 decode calls.
// A rate is 0 when its count or its time is 0 (nothing to divide).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>  // callers of ToJson include <nlohmann/json.hpp>

namespace slm::llm {

struct GenerationStats {
  double load_ms = 0;
  double ttft_ms = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  int64_t prompt_tokens = 0;            // tokens in the prompt
  int64_t prefill_tokens_computed = 0;  // prompt tokens actually run (excludes reused cache)
  int64_t generated_tokens = 0;         // tokens sampled, the first one included
  int64_t peak_rss_bytes = 0;           // process peak resident set size, 0 if unknown

  int64_t decode_calls() const { return generated_tokens > 1 ? generated_tokens - 1 : 0; }
  double prefill_tok_per_s() const;
  double decode_tok_per_s() const;

  // One line for stderr:
  // "load 3.1 ms | ttft 4.2 ms | prefill 1234.5 tok/s (12 tok) | decode 456.7 tok/s (255 tok)
  //  | peak RSS 12.3 MiB" (one line; the decode count is decode_calls()).
  std::string ToText() const;

  // Every field plus the two rates, keys named as the fields ("prefill_tok_per_s", ...).
  nlohmann::json ToJson() const;
};

// Peak resident set size of this process in bytes (getrusage ru_maxrss, KiB on Linux);
// 0 if unavailable.
int64_t PeakRssBytes();

// Monotonic wall-clock timer (steady_clock), started on construction.
class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void Restart() { start_ = Clock::now(); }
  double elapsed_ms() const {
    return std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

}  // namespace slm::llm
