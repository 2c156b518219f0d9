// Replays saved fuzz inputs through the fuzz targets without libFuzzer, so every fixed finding
// stays fixed in the normal and the ASan+UBSan test suites (fuzz/regressions.cmake registers one
// CTest test per fuzz/regressions/<target>/ folder).
//   fuzz_replay <target> <file or folder>...
// Each target's LLVMFuzzerTestOneInput is compiled renamed to slm_fuzz_<target>. A crash or a
// sanitizer report fails the test; inputs are run in name order, each printed first.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define SLM_FUZZ_TARGET(n) extern "C" int slm_fuzz_##n(const uint8_t* data, size_t size);
#include "fuzz_replay_targets.inc"
#undef SLM_FUZZ_TARGET

namespace {

struct Target {
  const char* name;
  int (*run)(const uint8_t*, size_t);
};

#define SLM_FUZZ_TARGET(n) {#n, slm_fuzz_##n},
const Target kTargets[] = {
#include "fuzz_replay_targets.inc"
};
#undef SLM_FUZZ_TARGET

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <target> <file or folder>...\n", argv[0]);
    return 2;
  }
  const Target* target = nullptr;
  for (const Target& t : kTargets) {
    if (std::strcmp(t.name, argv[1]) == 0) target = &t;
  }
  if (!target) {
    std::fprintf(stderr, "fuzz_replay: no target '%s' in this build\n", argv[1]);
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& e : fs::directory_iterator(argv[i])) {
        if (e.is_regular_file()) inputs.push_back(e.path());
      }
    } else {
      inputs.emplace_back(argv[i]);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", p.c_str());
      return 1;
    }
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "fuzz_replay: %s %s (%zu bytes)\n", target->name, p.c_str(), bytes.size());
    target->run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz_replay: %s: %zu inputs replayed cleanly\n", target->name, inputs.size());
  return 0;
}
