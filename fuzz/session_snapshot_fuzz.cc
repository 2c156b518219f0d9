// Fuzzes the session snapshot reader (docs/session-snapshot.md): magic, version, sizes,
// checksum, internal consistency; then the geometry check against stories260K's metadata.
// Like artifact_fuzz, the checksum is recomputed when the input has a snapshot header, so
// mutations reach the body parser (see FixChecksum).
#include <xxhash.h>

#include <cstring>
#include <string>

#include "fuzz/fuzz_util.h"
#include "llm/session_snapshot.h"

namespace {

// An input that starts with the magic gets a matching payload size (bytes 16..24) and checksum
// (XXH64 of bytes [0, 24) then the payload, at 24..32); odd first version bytes keep the
// input's own values so the size and checksum checks are fuzzed too.
std::string FixChecksum(const uint8_t* data, size_t size) {
  std::string file(reinterpret_cast<const char*>(data), size);
  if (size < slm::llm::kSnapshotHeaderBytes || std::memcmp(data, slm::llm::kSnapshotMagic, 8) != 0 ||
      (data[9] & 1) != 0) {
    return file;
  }
  const uint64_t payload = size - slm::llm::kSnapshotHeaderBytes;
  std::memcpy(file.data() + 16, &payload, 8);
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  XXH64_update(st, file.data(), 24);
  XXH64_update(st, file.data() + slm::llm::kSnapshotHeaderBytes, payload);
  const uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  std::memcpy(file.data() + 24, &h, 8);
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = slm::fuzz::Input().Write(FixChecksum(data, size));
  auto snap = slm::llm::ReadSessionSnapshot(path);
  if (!snap.ok()) return 0;
  for (size_t l = 0; l < snap->layers.size(); ++l) (void)snap->CommittedSlots(l);
  slm::io::ContractMetadata meta;
  meta.max_context_len = 64;
  meta.vocab_size = 512;
  meta.groups = {{"full", 64, 0}};
  meta.layers.assign(5, {"full", 4, 8});
  (void)snap->CheckGeometry(meta, "fuzz");
  return 0;
}
