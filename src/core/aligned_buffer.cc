#include "core/aligned_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace slm {
namespace {

bool Mapped(size_t bytes) { return bytes >= AlignedHeapAllocator::kMapThreshold; }

size_t PageRounded(size_t bytes) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* AlignedHeapAllocator::Allocate(size_t bytes, size_t alignment) {
  if (!Mapped(bytes)) {
    const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  }
  // Map `alignment` extra bytes and unmap the slack on both sides, so exactly
  // [aligned, aligned + PageRounded(bytes)) stays mapped and Free can unmap it by size alone.
  const size_t len = PageRounded(bytes);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t extra = alignment > page ? alignment : 0;
  void* raw = ::mmap(nullptr, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + alignment - 1) / alignment * alignment;
  if (aligned > begin) ::munmap(raw, aligned - begin);
  const uintptr_t end = begin + len + extra;
  if (end > aligned + len) ::munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
  return reinterpret_cast<void*>(aligned);
}

void AlignedHeapAllocator::Free(void* p, size_t bytes) {
  // Buffer passes back the size it allocated, so the path Allocate took is known here.
  if (Mapped(bytes)) {
    ::munmap(p, PageRounded(bytes));
  } else {
    std::free(p);
  }
}

void* AlignedHeapAllocator::AllocateZeroed(size_t bytes, size_t alignment) {
  void* p = Allocate(bytes, alignment);
  if (p != nullptr && !Mapped(bytes)) std::memset(p, 0, bytes);
  return p;
}

void AdviseHugePages(void* p, size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  if (bytes >= kHugePage) ::madvise(p, bytes, MADV_HUGEPAGE);
}

Allocator& DefaultAllocator() {
  static AlignedHeapAllocator allocator;
  return allocator;
}

}  // namespace slm
