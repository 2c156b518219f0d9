// A fixed pool of worker threads for splitting one kernel call (a matmul's output columns,
// attention heads) over the machine's cores.
//
// Threads are created once; a ParallelFor call allocates nothing, takes no lock on the fast path
// and creates no thread: the caller publishes the job through an atomic generation counter,
// workers spin briefly on it (then sleep on a futex via std::atomic::wait), the caller runs
// chunk 0 itself and spins until the others report done. Work is split statically into one
// contiguous chunk per thread, so a chunk always touches the same slice of weights.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace slm {

class ThreadPool {
 public:
  // `num_threads` includes the calling thread (1 = run everything inline, no workers).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // Splits [0, n) into size() contiguous chunks whose boundaries are multiples of `align`
  // (except n itself) and calls fn(begin, end) — or fn(begin, end, chunk) when it takes the
  // chunk index in [0, size()), e.g. to pick per-thread scratch — once per non-empty chunk,
  // chunk 0 on the calling thread. Returns when every chunk is done. Called from inside a chunk (nested), it runs the
  // whole range inline. Not reentrant from two outside threads at once (one caller at a time).
  template <typename Fn>
  void ParallelFor(int64_t n, int64_t align, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    Run(n, align,
        [](void* ctx, int64_t b, int64_t e, int chunk) {
          if constexpr (std::is_invocable_v<F&, int64_t, int64_t, int>) {
            (*static_cast<F*>(ctx))(b, e, chunk);
          } else {
            (*static_cast<F*>(ctx))(b, e);
          }
        },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // The process-wide pool the runtime uses: created on first use with DefaultThreadCount()
  // threads, or the count set by SetDefaultThreadCount before that.
  static ThreadPool& Default();
  // Physical parallelism of this machine: hardware_concurrency(), at least 1.
  static int MachineThreadCount();
  // Makes the default pool one of `n` threads (n <= 0: the machine count). Must not be called
  // while kernels run. Used by `-t N`. Replaced pools stay alive (asleep) until exit.
  static void SetDefaultThreadCount(int n);

 private:
  using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end, int chunk);
  void Run(int64_t n, int64_t align, ChunkFn fn, void* ctx);
  void WorkerLoop(int index);
  void RunChunk(int index);

  const int num_threads_;
  std::vector<std::thread> workers_;
  // The current job; written by the caller before `generation_` is bumped (release).
  ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0, align_ = 1;
  alignas(64) std::atomic<uint32_t> generation_{0};  // 32-bit: futex-backed wait
  alignas(64) std::atomic<int> pending_{0};    // worker chunks not finished yet
  alignas(64) std::atomic<int> sleepers_{0};   // workers blocked in atomic::wait
  std::atomic<bool> stop_{false};
};

}  // namespace slm
