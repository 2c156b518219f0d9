// Fuzzes the hf_static metadata parser (the JSON stored in every artifact) and its round trip:
// whatever FromJson accepts, ToJson must write and FromJson must read back.
#include <cstdlib>
#include <string>

#include "io/contract_metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto meta = slm::io::ContractMetadata::FromJson(std::string(reinterpret_cast<const char*>(data), size));
  if (!meta.ok()) return 0;
  for (const auto& g : meta->groups) (void)meta->FindGroup(g.name);
  for (const auto& m : meta->methods) (void)meta->FindMethod(m.name);
  std::string text;
  try {
    text = meta->ToJson().dump();
  } catch (const std::exception&) {
    return 0;  // strings that are not UTF-8 cannot be dumped; FromJson's input had them too
  }
  if (!slm::io::ContractMetadata::FromJson(text).ok()) std::abort();  // round trip must hold
  return 0;
}
