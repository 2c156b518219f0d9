// The staticlm command line: one file per subcommand, each registering itself on the app.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "core/status.h"

namespace slm::cli {

// A subcommand's action; returns the process exit code.
using Action = std::function<int()>;

// Each Add* registers a subcommand and returns the action to run when it was selected.
Action AddCompile(CLI::App& app);
Action AddRun(CLI::App& app);
Action AddInspect(CLI::App& app);
Action AddTokenize(CLI::App& app);
// The pipeline (tools/pipeline_cmd.cc, eval_cmd.cc, device_exec_cmd.cc).
Action AddPipeline(CLI::App& app);
Action AddPrepare(CLI::App& app);
Action AddQuantize(CLI::App& app);
Action AddInfer(CLI::App& app);
Action AddEval(CLI::App& app);
Action AddDeviceExec(CLI::App& app);
Action AddConformance(CLI::App& app);
Action AddBench(CLI::App& app);
Action AddGenCheckpoint(CLI::App& app);

// Prints "staticlm: error: <message>" as one line on stderr and returns exit code 1.
int Fail(const Status& status);

}  // namespace slm::cli
