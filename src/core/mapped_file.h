// Read-only memory-mapped files: weights are used in place, never copied whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace slm {

// How a file's bytes are brought into memory (docs/bad-inputs.md, "Files truncated while
// mapped"):
//   kMap   mmap: pages come from the page cache on demand and are shared. If another process
//          truncates the file while it is mapped, touching a vanished page raises SIGBUS: the
//          file must not be modified in place while loaded (writers replace files atomically).
//   kRead  read whole into private anonymous memory at open: costs the file's size in RAM, but
//          once Open returns the file may change or vanish without effect. A file that shrinks
//          or grows while being read is an IoError.
enum class FileAccess { kMap, kRead };
// The access Open uses when none is given: kRead if the environment variable SLM_FILE_ACCESS is
// "read" when first asked, else kMap; SetDefaultFileAccess overrides it for the process.
FileAccess DefaultFileAccess();
void SetDefaultFileAccess(FileAccess access);

class MappedFile {
 public:
  // Maps (or reads, see FileAccess) `path` read-only. Errors name the path: missing, a
  // directory, unreadable, empty is OK (size 0, data nullptr).
  static Result<std::shared_ptr<MappedFile>> Open(const std::string& path);
  static Result<std::shared_ptr<MappedFile>> Open(const std::string& path, FileAccess access);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// How much of the address range [begin, begin + size) is resident, and how much of that sits in
// huge pages (file pages mapped by 2 MB page-table entries, or anonymous transparent huge pages
// when the file was read): summed over the /proc/self/smaps entries of the mappings the range
// overlaps, whole (a mapping is the unit smaps reports). All zero where /proc is not readable or
// no mapping overlaps. Every token streams the weights, so a run whose artifact sits in 4 KB
// pages (written by a compile, or read back into a fragmented page cache) decodes slower:
// docs/benchmarks.md, "Page cache and huge pages".
struct MappingResidency {
  uint64_t resident_bytes = 0;
  uint64_t huge_page_bytes = 0;
};
MappingResidency ResidencyOf(const void* begin, size_t size);

// Reads a whole (small) file into a string; errors name the path.
Result<std::string> ReadFileToString(const std::string& path);

}  // namespace slm
