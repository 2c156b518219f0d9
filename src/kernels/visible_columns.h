// Index of the visible columns of one additive attention-mask row, kept inside the caller's
// scratch row so that attention needs no extra memory and walks only visible columns.
//
// A column is hidden when its mask value is -inf. One backward scan (O(n), shared by all heads
// of a row) writes, into the scratch slot of each hidden column that starts a hidden run, the
// index of the first visible column after that run. Walking the index then costs O(visible +
// hidden runs). The slots of visible columns are never touched here, so the caller may store
// per-column values (attention scores) in them while walking.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace slm::kernels {

class VisibleColumns {
 public:
  // mask, slots: [n]. Requires n < 2^31.
  VisibleColumns(const float* mask, float* slots, int64_t n) : mask_(mask), slots_(slots), n_(n) {
    int64_t next_visible = n;
    for (int64_t j = n - 1; j >= 0; --j) {
      if (!IsHidden(mask[j])) {
        next_visible = j;
        ++count_;
      } else if (j == 0 || !IsHidden(mask[j - 1])) {
        StoreIndex(j, next_visible);
      }
    }
    first_ = next_visible;
  }

  int64_t count() const { return count_; }
  // Iteration: for (j = first(); j < end(); j = Next(j)).
  int64_t first() const { return first_; }
  int64_t end() const { return n_; }
  int64_t Next(int64_t j) const {
    ++j;
    if (j < n_ && IsHidden(mask_[j])) j = LoadIndex(j);  // j starts a hidden run
    return j;
  }

  static bool IsHidden(float m) { return m == -std::numeric_limits<float>::infinity(); }

 private:
  // Indices are stored as int32 bit patterns in float slots (memcpy: no aliasing games).
  void StoreIndex(int64_t slot, int64_t index) {
    const int32_t i = int32_t(index);
    std::memcpy(&slots_[slot], &i, sizeof(i));
  }
  int64_t LoadIndex(int64_t slot) const {
    int32_t i;
    std::memcpy(&i, &slots_[slot], sizeof(i));
    return i;
  }

  const float* mask_;
  float* slots_;
  int64_t n_;
  int64_t count_ = 0;
  int64_t first_ = 0;
};

}  // namespace slm::kernels
