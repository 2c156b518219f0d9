// Fuzzes the artifact loader past its checksum: the input is a Program FlatBuffer, wrapped here
// in a valid header (fresh checksum) and a zero-filled data section, so mutations reach the
// FlatBuffer verifier, the constant table, the method decoder, the op checks, the session's
// metadata validation and the embedded tokenizer — and, for a program that passes all of that,
// execution (a verified program must run memory-safely whatever its weights).
//
// Input: u64 little-endian data-section size (taken modulo 4 MiB), then the program bytes.
// Seeds: scripts/fuzz.sh extracts them from real artifacts (fuzz/make_seeds.py).
#include <cstring>
#include <string>

#include "fuzz/fuzz_util.h"
#include "io/artifact_reader.h"
#include "io/artifact_writer.h"
#include "io/contract_metadata.h"
#include "llm/runner.h"

namespace {

constexpr uint64_t kMaxDataBytes = 4u << 20;

std::string WrapProgram(const uint8_t* data, size_t size) {
  uint64_t data_size = 0;
  if (size >= 8) std::memcpy(&data_size, data, 8);
  data_size %= kMaxDataBytes + 1;
  std::string_view program;
  if (size > 8) program = std::string_view(reinterpret_cast<const char*>(data) + 8, size - 8);
  slm::io::ArtifactHeader h;
  h.program_size = program.size();
  const uint64_t a = slm::io::kArtifactDataAlignment;
  h.data_offset = (slm::io::kArtifactHeaderBytes + program.size() + a - 1) / a * a;
  h.data_size = data_size;
  const auto header = slm::io::EncodeArtifactHeader(h, program);
  std::string file(reinterpret_cast<const char*>(header.data()), header.size());
  file.append(program);
  file.resize(h.data_offset + h.data_size, '\0');
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = slm::fuzz::Input().Write(WrapProgram(data, size));
  auto artifact = slm::io::ArtifactFile::Open(path);
  if (!artifact.ok()) return 0;
  for (const std::string& name : (*artifact)->method_names()) (void)(*artifact)->LoadMethod(name);
  (void)slm::io::ContractMetadata::FromJson((*artifact)->metadata_json());

  auto runner = slm::llm::Runner::Load(path);
  if (!runner.ok()) return 0;
  const auto& meta = (*runner)->metadata();
  const int32_t first = meta.bos_id.value_or(0);
  if (first < 0 || first >= meta.vocab_size) return 0;
  slm::llm::GenerateOptions opt;
  opt.max_new_tokens = 2;
  opt.sampling = {};  // greedy
  const int32_t prompt[1] = {first};
  (void)(*runner)->Generate(prompt, opt);
  if ((*runner)->tokenizer()) (void)(*runner)->Encode("Once upon a time");
  return 0;
}
