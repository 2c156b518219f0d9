// Helpers shared by the fuzz targets (fuzz/<target>_fuzz.cc, built with -DSLM_FUZZ=ON).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace slm::fuzz {

// The loaders under test take a path (they mmap it), so each input is written to an in-memory
// file (memfd) and handed over as /proc/self/fd/N: no disk traffic, one file per process.
class InputFile {
 public:
  InputFile() {
    fd_ = ::memfd_create("slm-fuzz-input", MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  // Replaces the file's content with `bytes`; returns its path.
  const std::string& Write(std::string_view bytes) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::pwrite(fd_, bytes.data() + off, bytes.size() - off, static_cast<off_t>(off));
      if (n <= 0) std::abort();
      off += static_cast<size_t>(n);
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// One InputFile per process (libFuzzer runs inputs one after another in one thread).
inline InputFile& Input() {
  static InputFile* file = new InputFile();
  return *file;
}

}  // namespace slm::fuzz
