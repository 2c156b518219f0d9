// Registers the quantization schemes of src/quant (issue 7) as Quantizer adapters, when that
// module is built into this tree (CMake defines SLM_HAVE_QUANT); otherwise registers nothing and
// only the built-in scheme "none" exists.
#pragma once

namespace slm::pipeline {
struct AdapterRegistry;
void RegisterQuantSchemes(AdapterRegistry& registry);
}  // namespace slm::pipeline
