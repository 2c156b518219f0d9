#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace slm {
namespace {
constexpr size_t kBufferSize = 1 << 20;
}

Result<AtomicFileWriter> AtomicFileWriter::Create(const std::string& final_path) {
  AtomicFileWriter w;
  w.final_path_ = final_path;
  w.temp_path_ = final_path + ".tmp." + std::to_string(::getpid());
  w.fd_ = ::open(w.temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd_ < 0) {
    return IoError(final_path + ": cannot create temporary file " + w.temp_path_ + ": " +
                   std::strerror(errno));
  }
  w.buffer_.reserve(kBufferSize);
  return w;
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : final_path_(std::move(o.final_path_)),
      temp_path_(std::move(o.temp_path_)),
      fd_(o.fd_),
      written_(o.written_),
      buffer_(std::move(o.buffer_)) {
  o.fd_ = -1;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

Status AtomicFileWriter::Flush() {
  size_t off = 0;
  while (off < buffer_.size()) {
    ssize_t n = ::write(fd_, buffer_.data() + off, buffer_.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(final_path_ + ": write failed: " + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  buffer_.clear();
  return Status::Ok();
}

Status AtomicFileWriter::Write(const void* data, size_t size) {
  if (fd_ < 0) return FailedPrecondition(final_path_ + ": writer already committed");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    size_t take = std::min(size, kBufferSize - buffer_.size());
    buffer_.append(p, take);
    p += take;
    size -= take;
    written_ += take;
    if (buffer_.size() == kBufferSize) SLM_RETURN_IF_ERROR(Flush());
  }
  return Status::Ok();
}

Status AtomicFileWriter::WriteZeros(size_t size) {
  static const char kZeros[4096] = {};
  while (size > 0) {
    size_t take = std::min(size, sizeof(kZeros));
    SLM_RETURN_IF_ERROR(Write(kZeros, take));
    size -= take;
  }
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return FailedPrecondition(final_path_ + ": writer already committed");
  SLM_RETURN_IF_ERROR(Flush());
  if (::fsync(fd_) != 0) return IoError(final_path_ + ": fsync failed: " + std::strerror(errno));
  // Drop the written pages, clean after the fsync, from the page cache (advice: errors ignored).
  // They were allocated while the writer (a compile holding gigabytes) fragmented memory: scattered
  // 4 KB pages, and a 1B artifact mapped from them prefilled and decoded 1.26-1.47x slower than
  // from the pages a later read brings in, which readahead allocates as large contiguous folios
  // (fewer TLB misses; docs/benchmarks.md, "Page cache and huge pages"). The next open reads the
  // file from disk.
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(temp_path_.c_str());
    return IoError(final_path_ + ": close failed: " + std::strerror(errno));
  }
  fd_ = -1;
  if (std::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_path_.c_str());
    return IoError(final_path_ + ": rename from " + temp_path_ + " failed: " + std::strerror(err));
  }
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  SLM_ASSIGN_OR_RETURN(auto w, AtomicFileWriter::Create(path));
  SLM_RETURN_IF_ERROR(w.Write(contents.data(), contents.size()));
  return w.Commit();
}

}  // namespace slm
