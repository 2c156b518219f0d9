// ThreadPool: every index of the range is covered exactly once, chunk boundaries respect the
// alignment, nested calls run inline, and the pool is reusable across many calls.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace slm {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnceForManySizesAndThreadCounts) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 8, 9, 63, 64, 65, 1000}) {
      for (int64_t align : {1, 8}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.ParallelFor(n, align, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[size_t(i)].load(), 1) << "threads=" << threads << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(ThreadPoolTest, ChunkBoundariesAreMultiplesOfTheAlignment) {
  ThreadPool pool(3);
  std::atomic<int> misaligned{0};
  pool.ParallelFor(1000, 8, [&](int64_t b, int64_t e) {
    if (b % 8 != 0 || (e != 1000 && e % 8 != 0)) misaligned.fetch_add(1);
  });
  EXPECT_EQ(misaligned.load(), 0);
}

TEST(ThreadPoolTest, PassesDistinctChunkIndicesBelowThePoolSize) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> chunks(4);
  pool.ParallelFor(400, 1, [&](int64_t, int64_t, int chunk) {
    ASSERT_GE(chunk, 0);
    ASSERT_LT(chunk, 4);
    chunks[size_t(chunk)].fetch_add(1);
  });
  for (auto& c : chunks) EXPECT_EQ(c.load(), 1);
}

TEST(ThreadPoolTest, NestedCallsRunInlineWithoutDeadlock) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(10, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.ParallelFor(10, 1, [&](int64_t b2, int64_t e2) { sum.fetch_add(e2 - b2); });
    }
  });
  EXPECT_EQ(sum.load(), 100);
}

TEST(ThreadPoolTest, ReusableForHundredsOfCallsWithResultsVisibleToTheCaller) {
  ThreadPool pool(2);
  std::vector<int64_t> out(64);
  for (int iter = 0; iter < 300; ++iter) {
    pool.ParallelFor(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[size_t(i)] = iter + i;  // plain writes, no atomics
    });
    ASSERT_EQ(out[0], iter);
    ASSERT_EQ(out[63], iter + 63);
  }
}

TEST(ThreadPoolTest, DefaultPoolFollowsSetDefaultThreadCount) {
  ThreadPool::SetDefaultThreadCount(3);
  EXPECT_EQ(ThreadPool::Default().size(), 3);
  ThreadPool::SetDefaultThreadCount(0);
  EXPECT_EQ(ThreadPool::Default().size(), ThreadPool::MachineThreadCount());
}

}  // namespace
}  // namespace slm
