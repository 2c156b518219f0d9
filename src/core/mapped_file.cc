#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/aligned_buffer.h"

namespace slm {

namespace {
// -1: not decided yet (read SLM_FILE_ACCESS on first use).
std::atomic<int> g_default_access{-1};

// Reads `size` bytes of `fd` into `dst`; an early end of file or a size change is an error, not
// a short buffer.
Status ReadWhole(int fd, const std::string& path, uint8_t* dst, size_t size) {
  size_t done = 0;
  while (done < size) {
    const size_t want = std::min<size_t>(size - done, size_t{1} << 30);
    const ssize_t got = ::pread(fd, dst + done, want, static_cast<off_t>(done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return IoError(path + ": read failed at byte " + std::to_string(done) + ": " + std::strerror(errno));
    }
    if (got == 0) {
      return IoError(path + ": file shrank from " + std::to_string(size) + " to " + std::to_string(done) +
                     " bytes while being read (modified by another process?)");
    }
    done += static_cast<size_t>(got);
  }
  struct stat after {};
  if (::fstat(fd, &after) != 0 || static_cast<size_t>(after.st_size) != size) {
    return IoError(path + ": file changed size from " + std::to_string(size) + " to " + std::to_string(after.st_size) +
                   " bytes while being read (modified by another process?)");
  }
  return Status::Ok();
}
}  // namespace

FileAccess DefaultFileAccess() {
  int v = g_default_access.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* env = std::getenv("SLM_FILE_ACCESS");
    v = static_cast<int>(env != nullptr && std::strcmp(env, "read") == 0 ? FileAccess::kRead : FileAccess::kMap);
    int expected = -1;
    if (!g_default_access.compare_exchange_strong(expected, v)) v = expected;
  }
  return static_cast<FileAccess>(v);
}

void SetDefaultFileAccess(FileAccess access) { g_default_access.store(static_cast<int>(access)); }

Result<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) { return Open(path, DefaultFileAccess()); }

Result<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path, FileAccess access) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below); no effect
  // on regular files.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFound(path + ": no such file");
    if (err == ELOOP) return IoError(path + ": cannot open: too many levels of symbolic links (a symlink loop)");
    return IoError(path + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return IoError(path + ": cannot stat: " + std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + ": is a directory, expected a file");
  }
  if (!S_ISREG(st.st_mode)) {  // FIFO, socket, device: no size to map, reads could block
    ::close(fd);
    return InvalidArgument(path + ": is not a regular file (a FIFO, socket or device), expected a file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0 && access == FileAccess::kRead) {
    // Private anonymous pages (freed by the same munmap as a file mapping), read-only once
    // filled.
    void* p = ::mmap(nullptr, file->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return ResourceExhausted(path + ": cannot allocate " + std::to_string(file->size_) + " bytes to read the file into: " +
                               std::strerror(err));
    }
    file->data_ = static_cast<const uint8_t*>(p);  // owned by `file` from here on
    AdviseHugePages(p, file->size_);  // allocated as huge pages when written
    Status st = ReadWhole(fd, path, static_cast<uint8_t*>(p), file->size_);
    ::close(fd);
    if (!st.ok()) return st;
    ::mprotect(p, file->size_, PROT_READ);
    return file;
  }
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return IoError(path + ": mmap failed: " + std::strerror(err));
    }
    file->data_ = static_cast<const uint8_t*>(p);
    // Every token streams all the weights: mapped by 4 KB pages a 1B artifact costs a TLB miss
    // per 4 KB, and file pages left scattered by earlier use cost more (docs/benchmarks.md, "Page
    // cache and huge pages"). A page-cache miss then reads 2 MB folios where the filesystem has
    // large folios (ext4, XFS on Linux 6.x), each mapped by one PMD entry.
    AdviseHugePages(p, file->size_);
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappingResidency ResidencyOf(const void* begin, size_t size) {
  MappingResidency r;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(begin), hi = lo + size;
  std::ifstream in("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    // A mapping's header "start-end perms ..." (hex), then "Key:   value kB" lines.
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> start >> dash >> end && dash == '-') {
      inside = start < hi && lo < end;
      continue;
    }
    if (!inside) continue;
    std::istringstream field(line);
    std::string key;
    uint64_t kb = 0;
    if (!(field >> key >> kb)) continue;
    if (key == "Rss:") r.resident_bytes += kb * 1024;
    if (key == "FilePmdMapped:" || key == "AnonHugePages:") r.huge_page_bytes += kb * 1024;
  }
  return r;
}

Result<std::string> ReadFileToString(const std::string& path) {
  SLM_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

}  // namespace slm
