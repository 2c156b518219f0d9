// staticlm: compile HF checkpoints into one static-shape artifact, run and inspect it.
#include <cstdio>
#include <vector>

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
  add(slm::cli::AddCompile);
  add(slm::cli::AddRun);
  add(slm::cli::AddInspect);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, action] : commands) {
    if (sub->parsed()) return action();
  }
  return 1;
}
