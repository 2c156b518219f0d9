#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace slm {

Result<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
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
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return IoError(path + ": mmap failed: " + std::strerror(err));
    }
    file->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Result<std::string> ReadFileToString(const std::string& path) {
  SLM_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

}  // namespace slm
