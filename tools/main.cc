// staticlm: compile HF checkpoints into one static-shape artifact, run and inspect it.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/memory_limit.h"
#include "kernels/kernels.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"staticlm: Hugging Face decoder LLM → one fixed-shape artifact → generated text"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, slm::cli::Action>> commands;
  auto add = [&](slm::cli::Action (*fn)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    slm::cli::Action action = fn(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(action));
  };
  std::string memory_limit;
  app.add_option("--memory-limit", memory_limit,
                 "refuse a checkpoint or artifact that needs more memory than this (bytes, or a "
                 "K/M/G/T suffix); default: $SLM_MEMORY_LIMIT, else the physical RAM");
  std::string simd_target;
  app.add_option("--simd-target", simd_target,
                 "run the kernels' code for this SIMD target (AVX2, SSE4, NEON, SVE_256, ...) instead "
                 "of the best this CPU has; default: $SLM_SIMD_TARGET, else the best");
  add(slm::cli::AddCompile);
  add(slm::cli::AddRun);
  add(slm::cli::AddInspect);
  add(slm::cli::AddTokenize);
  add(slm::cli::AddPipeline);
  add(slm::cli::AddPrepare);
  add(slm::cli::AddQuantize);
  add(slm::cli::AddInfer);
  add(slm::cli::AddEval);
  add(slm::cli::AddDeviceExec);
  add(slm::cli::AddConformance);
  add(slm::cli::AddBench);
  add(slm::cli::AddGenCheckpoint);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!memory_limit.empty()) {
    const auto bytes = slm::ParseByteSize(memory_limit);
    if (!bytes || *bytes == 0) {
      std::fprintf(stderr, "staticlm: error: --memory-limit '%s' is not a byte size (e.g. 512M, 4G)\n",
                   memory_limit.c_str());
      return 2;
    }
    slm::SetMemoryLimitBytes(*bytes);
  }
  if (simd_target.empty()) {
    if (const char* env = std::getenv("SLM_SIMD_TARGET")) simd_target = env;
  }
  if (!simd_target.empty()) {
    if (slm::Status s = slm::kernels::SelectSimdTarget(simd_target); !s.ok()) {
      std::fprintf(stderr, "staticlm: error: --simd-target / SLM_SIMD_TARGET: %s\n", s.message().c_str());
      return 2;
    }
  }
  for (auto& [sub, action] : commands) {
    if (sub->parsed()) return action();
  }
  return 1;
}
