#include <cstdio>

#include "model/compiler.h"
#include "tools/commands.h"

namespace slm::cli {

Action AddCompile(CLI::App& app) {
  struct Args {
    std::string checkpoint, output;
    int64_t max_context = 0;
    int64_t prefill_step = 32;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile a Hugging Face checkpoint directory into one .slm artifact");
  cmd->add_option("checkpoint", args->checkpoint, "HF checkpoint directory (config.json, *.safetensors, tokenizer)")->required();
  cmd->add_option("-o,--output", args->output, "artifact path to write (atomically)")->required();
  cmd->add_option("--max-context", args->max_context, "max context length (default: min(max_position_embeddings, 2048))");
  cmd->add_option("--prefill-step", args->prefill_step, "tokens per prefill call (C)")->capture_default_str();
  return [args]() {
    model::CompileOptions opt;
    opt.max_context_len = args->max_context;
    opt.prefill_steps = {args->prefill_step};
    auto report = model::CompileCheckpoint(args->checkpoint, args->output, opt);
    if (!report.ok()) return Fail(report.status());
    std::fprintf(stderr, "wrote %s: %.2f MiB, max context %lld, methods:", report->artifact_path.c_str(),
                 report->artifact_bytes / 1048576.0, static_cast<long long>(report->max_context_len));
    for (const auto& m : report->methods) std::fprintf(stderr, " %s", m.c_str());
    std::fprintf(stderr, "\n");
    return 0;
  };
}

}  // namespace slm::cli
