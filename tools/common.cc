#include <cstdio>

#include "tools/commands.h"

namespace slm::cli {

int Fail(const Status& status) {
  std::fprintf(stderr, "staticlm: error: %s\n", status.message().c_str());
  return 1;
}

}  // namespace slm::cli
