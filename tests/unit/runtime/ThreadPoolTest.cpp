//===- ThreadPoolTest.cpp - The CPU launch pool ---------------------------===//
//
// Every item runs exactly once, however the loop is split, and concurrent callers are serialized. Also
// run under ThreadSanitizer by `make test-tsan`.
//===----------------------------------------------------------------------===//
#include "moec/runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

using namespace moec;

namespace {

/// Runs one loop over [0, n) and checks that every item was visited once, in at most size() chunks, none
/// shorter than minChunk when there are several (a short tail would wake a thread for too little work).
void expectEachOnce(ThreadPool &pool, int64_t n, int64_t minChunk) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::mutex mutex;
  std::vector<int64_t> chunks;
  pool.parallelFor(n, minChunk, [&](int64_t begin, int64_t end) {
    ASSERT_LE(0, begin);
    ASSERT_LE(begin, end);
    ASSERT_LE(end, n);
    for (int64_t i = begin; i < end; ++i)
      hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mutex);
    chunks.push_back(end - begin);
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "item " << i << " of " << n;
  EXPECT_LE(chunks.size(), pool.size()) << n << " items, minChunk " << minChunk;
  for (int64_t c : chunks)
    if (chunks.size() > 1)
      EXPECT_GE(c, minChunk) << n << " items in " << chunks.size() << " chunks";
  if (n >= 2 * minChunk && pool.size() > 1)
    EXPECT_GE(chunks.size(), 2u) << n << " items, minChunk " << minChunk << ": room for two chunks, one used";
}

} // namespace

TEST(ThreadPool, EveryItemRunsOnce) {
  ThreadPool pool(4);
  EXPECT_GE(pool.size(), 1u);
  for (int64_t n : {0, 1, 2, 3, 7, 64, 1000, 4097})
    for (int64_t minChunk : {1, 3, 64, 5000})
      expectEachOnce(pool, n, minChunk);
}

TEST(ThreadPool, ManySmallLoopsInARow) {
  ThreadPool pool(3);
  for (int i = 0; i < 2000; ++i)
    expectEachOnce(pool, i % 17, 1);
}

TEST(ThreadPool, ConcurrentCallersAreSerialized) {
  ThreadPool pool(4);
  std::atomic<int> inLoop{0};
  std::atomic<bool> overlapped{false};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::atomic<int64_t> sum{0};
        pool.parallelFor(256, 8, [&](int64_t begin, int64_t end) {
          if (inLoop.fetch_add(1) < 0)
            overlapped = true;
          for (int64_t k = begin; k < end; ++k)
            sum.fetch_add(k, std::memory_order_relaxed);
          inLoop.fetch_sub(1);
        });
        EXPECT_EQ(sum.load(), 255 * 256 / 2);
      }
    });
  for (std::thread &c : callers)
    c.join();
  EXPECT_FALSE(overlapped.load());
}

TEST(ThreadPool, SharedPoolFromManyThreads) {
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([] {
      for (int i = 0; i < 100; ++i)
        expectEachOnce(ThreadPool::shared(), 100 + i, 4);
    });
  for (std::thread &c : callers)
    c.join();
}

TEST(ThreadPool, CreatedAndDestroyedRepeatedly) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(1 + i % 4);
    if (i % 2)
      expectEachOnce(pool, 33, 1);
  }
}
