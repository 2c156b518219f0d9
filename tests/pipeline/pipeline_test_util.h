// Helpers shared by the pipeline tests.
#pragma once

#include "pipeline/pipeline.h"

namespace slm::testing {

// Run options without the progress display (test logs stay readable).
inline pipeline::RunOptions Quiet() {
  pipeline::RunOptions o;
  o.progress = false;
  return o;
}

}  // namespace slm::testing
