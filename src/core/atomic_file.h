// Atomic file output: write to "<path>.tmp.<pid>", fsync, rename over <path>. A crash never
// leaves a truncated file under the final name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace slm {

class AtomicFileWriter {
 public:
  static Result<AtomicFileWriter> Create(const std::string& final_path);
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  ~AtomicFileWriter();  // removes the temp file unless Commit() succeeded

  Status Write(const void* data, size_t size);
  Status WriteZeros(size_t size);
  uint64_t bytes_written() const { return written_; }
  // fsync, drop the file's pages from the page cache (see atomic_file.cc), rename to the final path.
  Status Commit();

 private:
  AtomicFileWriter() = default;
  Status Flush();
  std::string final_path_, temp_path_;
  int fd_ = -1;
  uint64_t written_ = 0;
  std::string buffer_;
};

// One-shot helper for small files.
Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace slm
