#include "core/thread_pool.h"

#include <algorithm>
#include <memory>
#include <mutex>

// One spin-wait step: a CPU hint, not a system call (a sched_yield per step would make the
// spin phase a loop of syscalls). On aarch64 `yield` is a no-op on most cores, so the step is
// `isb`, which stalls the pipeline for tens of cycles, as Rust's spin_loop hint does there.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SLM_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define SLM_CPU_RELAX() __asm__ __volatile__("isb sy" ::: "memory")
#else
#define SLM_CPU_RELAX() std::this_thread::yield()
#endif

namespace slm {
namespace {

// Spins before sleeping: between two ops of one token the gap is microseconds, far less than a
// futex wake-up, but an idle process must not burn a core.
constexpr int kSpinIterations = 20000;

thread_local bool t_in_pool_chunk = false;

std::mutex g_default_mu;
std::atomic<ThreadPool*> g_default{nullptr};
int g_default_count = 0;
// Replaced pools are kept (idle, asleep) rather than destroyed: a caller may still hold one.
std::vector<std::unique_ptr<ThreadPool>>& AllPools() {
  static auto* pools = new std::vector<std::unique_ptr<ThreadPool>>();
  return *pools;
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  workers_.reserve(size_t(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunk(int index) {
  // Chunk boundaries: index * n / T rounded down to a multiple of align.
  auto bound = [&](int i) -> int64_t {
    if (i >= num_threads_) return n_;
    const int64_t b = n_ * i / num_threads_;
    return std::min(n_, b / align_ * align_);
  };
  const int64_t begin = bound(index), end = bound(index + 1);
  if (begin < end) {
    t_in_pool_chunk = true;
    fn_(ctx_, begin, end, index);
    t_in_pool_chunk = false;
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
      SLM_CPU_RELAX();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      generation_.wait(seen, std::memory_order_acquire);
      sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      continue;
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    RunChunk(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::Run(int64_t n, int64_t align, ChunkFn fn, void* ctx) {
  if (n <= 0) return;
  if (num_threads_ == 1 || t_in_pool_chunk) {
    fn(ctx, 0, n, 0);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  align_ = std::max<int64_t>(1, align);
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  // seq_cst so that the sleepers_ read below cannot move before the bump: a worker that saw
  // the old generation and is about to sleep has incremented sleepers_ before waiting.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  RunChunk(0);
  int spins = 0;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < kSpinIterations) {
      SLM_CPU_RELAX();
    } else {
      std::this_thread::yield();  // an oversubscribed machine: let the workers run
    }
  }
}

int ThreadPool::MachineThreadCount() {
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& ThreadPool::Default() {
  ThreadPool* p = g_default.load(std::memory_order_acquire);
  if (p != nullptr) return *p;
  std::lock_guard<std::mutex> lock(g_default_mu);
  p = g_default.load(std::memory_order_relaxed);
  if (p == nullptr) {
    AllPools().push_back(std::make_unique<ThreadPool>(g_default_count > 0 ? g_default_count : MachineThreadCount()));
    p = AllPools().back().get();
    g_default.store(p, std::memory_order_release);
  }
  return *p;
}

void ThreadPool::SetDefaultThreadCount(int n) {
  std::lock_guard<std::mutex> lock(g_default_mu);
  g_default_count = n > 0 ? n : MachineThreadCount();
  ThreadPool* p = g_default.load(std::memory_order_relaxed);
  if (p != nullptr && p->size() == g_default_count) return;
  for (auto& pool : AllPools()) {
    if (pool->size() == g_default_count) {
      g_default.store(pool.get(), std::memory_order_release);
      return;
    }
  }
  AllPools().push_back(std::make_unique<ThreadPool>(g_default_count));
  g_default.store(AllPools().back().get(), std::memory_order_release);
}

}  // namespace slm
