// bench: prefill / decode throughput of an artifact, load time, peak RSS, the artifact's share in
// huge pages, and fractions of the machine's limits (--roofline). docs/benchmarks.md has the
// reference commands and figures.
#include <cstdio>

#include "llm/bench.h"
#include "tools/commands.h"

namespace slm::cli {

Action AddBench(CLI::App& app) {
  struct Args {
    std::string model;
    int threads = 0;
    std::vector<int64_t> prompts = {128};
    int64_t n = 128;
    int repeats = 5;
    bool roofline = false, json = false, profile = false;
    double roofline_seconds = 1.0;
    std::string ab;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill and decode speed of a .slm artifact (and the machine's roofline)");
  cmd->add_option("model", a->model, "artifact (.slm)")->required();
  cmd->add_option("-t,--threads", a->threads, "threads (default: all cores)");
  cmd->add_option("-p,--prompt-lengths", a->prompts, "prompt lengths to prefill, e.g. 128,512")->delimiter(',')->capture_default_str();
  cmd->add_option("-n,--decode-tokens", a->n, "decode steps per repeat")->capture_default_str();
  cmd->add_option("-r,--repeats", a->repeats, "repeats (median, min, max reported)")->capture_default_str();
  cmd->add_flag("--roofline", a->roofline, "also measure read bandwidth, f32 FMA and int8 peaks, and report fractions of them");
  cmd->add_option("--roofline-seconds", a->roofline_seconds, "seconds per roofline probe")->capture_default_str();
  cmd->add_flag("--json", a->json, "print all figures as one JSON object");
  cmd->add_flag("--profile", a->profile, "also report where each method's time goes, per op kind and matmul weight role");
  cmd->add_option("--ab", a->ab,
                  "also run every repeat with one kernel switch flipped, back to back with the default, and report "
                  "both and their ratio: l1-prefetch, vnni, avx-vnni, amx, dotprod, i8mm or simd=TARGET");
  return [a]() {
    llm::BenchOptions o;
    o.threads = a->threads;
    o.prompt_lengths = a->prompts;
    o.decode_tokens = a->n;
    o.repeats = a->repeats;
    o.roofline = a->roofline;
    o.roofline_seconds = a->roofline_seconds;
    o.profile = a->profile;
    o.ab = a->ab;
    auto r = llm::RunBench(a->model, o);
    if (!r.ok()) return Fail(r.status());
    if (a->json) std::printf("%s\n", r->ToJson().dump(2).c_str());
    else std::printf("%s", r->ToText().c_str());
    return 0;
  };
}

}  // namespace slm::cli
