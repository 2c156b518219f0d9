// Allocator hook and aligned buffers. Every state and I/O buffer of a session comes from an
// Allocator (default: aligned heap) so an app or backend can supply shared or pinned memory.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace slm {

inline constexpr size_t kBufferAlignment = 64;

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory aligned to `alignment` (a power of two ≥ kBufferAlignment), or nullptr.
  virtual void* Allocate(size_t bytes, size_t alignment) = 0;
  virtual void Free(void* p, size_t bytes) = 0;
  // Zero-filled memory. The default writes the zeros; an allocator that gets pages already zeroed
  // from the OS overrides it, so a large cache is not touched (and not made resident) at load.
  virtual void* AllocateZeroed(size_t bytes, size_t alignment) {
    void* p = Allocate(bytes, alignment);
    if (p != nullptr) std::memset(p, 0, bytes);
    return p;
  }
};

// Small blocks from the C heap; blocks of kMapThreshold bytes or more (KV caches, arenas) straight
// from mmap, whose pages are zero and become resident only when first written.
class AlignedHeapAllocator final : public Allocator {
 public:
  static constexpr size_t kMapThreshold = size_t{1} << 20;
  void* Allocate(size_t bytes, size_t alignment) override;
  void Free(void* p, size_t bytes) override;
  void* AllocateZeroed(size_t bytes, size_t alignment) override;
};

// Process-wide default allocator.
Allocator& DefaultAllocator();

// Asks the kernel to back [p, p + bytes) with 2 MB pages when bytes >= 2 MB (MADV_HUGEPAGE:
// advice, ignored where there are no transparent huge pages; p page-aligned). For memory that is
// streamed whole again and again: the weights (MappedFile) and the bandwidth probe's buffer, so
// the bound is probed on the same kind of pages.
void AdviseHugePages(void* p, size_t bytes);

// An owned, aligned, zero-initialized byte buffer from an Allocator.
class Buffer {
 public:
  Buffer() = default;
  static Buffer Allocate(size_t bytes, Allocator& alloc = DefaultAllocator()) {
    Buffer b;
    b.alloc_ = &alloc;
    b.size_ = bytes;
    b.data_ = static_cast<uint8_t*>(alloc.AllocateZeroed(bytes, kBufferAlignment));
    if (b.data_ == nullptr) throw std::bad_alloc();
    return b;
  }
  Buffer(Buffer&& o) noexcept : alloc_(o.alloc_), data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      Reset();
      alloc_ = o.alloc_;
      data_ = o.data_;
      size_ = o.size_;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(data_); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data_); }

 private:
  void Reset() {
    if (data_ != nullptr) alloc_->Free(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }
  Allocator* alloc_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace slm
