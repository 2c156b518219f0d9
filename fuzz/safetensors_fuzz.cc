// Fuzzes the safetensors reader: header length, JSON header, dtypes, shapes, data_offsets,
// and the float32 conversion of every tensor the reader accepts.
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path =
      slm::fuzz::Input().Write(std::string_view(reinterpret_cast<const char*>(data), size));
  auto ckpt = slm::io::SafetensorsCheckpoint::OpenFile(path);
  if (!ckpt.ok()) return 0;
  std::vector<float> out;
  for (const std::string& name : ckpt->Names()) {
    const slm::io::TensorInfo* t = ckpt->Find(name);
    // Accepted tensors lie inside the file, so their float32 size is bounded by 2× its size.
    out.assign(t->nbytes * 2 / 4 + 1, 0.0f);
    (void)slm::io::SafetensorsCheckpoint::ReadAsF32(*t, out.data());
  }
  return 0;
}
