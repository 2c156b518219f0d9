// Fuzzes the pipeline YAML reader (src/pipeline/config.h): YAML → ConfigDoc with line numbers.
#include <string>

#include "pipeline/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = slm::pipeline::ParseYamlConfig(std::string(reinterpret_cast<const char*>(data), size),
                                            "fuzz.yaml", ".");
  if (doc.ok()) {
    slm::pipeline::Diagnostics diag(&*doc);
    for (const auto& [key, line] : doc->lines) (void)diag.LineOf(key);
  }
  return 0;
}
