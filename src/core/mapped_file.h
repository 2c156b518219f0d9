// Read-only memory-mapped files: weights are used in place, never copied whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace slm {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path: missing, a directory, unreadable, empty is OK
  // (size 0, data nullptr).
  static Result<std::shared_ptr<MappedFile>> Open(const std::string& path);
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

// Reads a whole (small) file into a string; errors name the path.
Result<std::string> ReadFileToString(const std::string& path);

}  // namespace slm
