// Fuzzes ArtifactFile::Open and Program::Load on raw file bytes, header and checksum included:
// truncations, lying sizes and offsets, flipped bytes. (artifact_fuzz goes deeper by fixing the
// checksum; this one checks that the header checks themselves never read out of bounds.)
#include <string>

#include "fuzz/fuzz_util.h"
#include "io/artifact_reader.h"
#include "runtime/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path =
      slm::fuzz::Input().Write(std::string_view(reinterpret_cast<const char*>(data), size));
  auto artifact = slm::io::ArtifactFile::Open(path);
  if (artifact.ok()) (void)(*artifact)->VerifyConstantHashes();
  auto program = slm::runtime::Program::Load(path);
  if (program.ok()) {
    for (const std::string& name : (*program)->method_names()) (void)(*program)->LoadMethod(name);
  }
  return 0;
}
