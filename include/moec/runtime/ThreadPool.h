//===- ThreadPool.h - Worker threads for CPU kernels -------------*- C++ -*-===//
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moec {

/// A fixed set of workers that run parallelFor loops. One loop at a time; callers of parallelFor from
/// several threads are serialized.
class ThreadPool {
public:
  /// `threads` = 0: one per hardware thread.
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return static_cast<unsigned>(workers.size()) + 1; }

  /// Runs body(begin, end) over [0, n) split into at most size() contiguous chunks of at least
  /// `minChunk` items each (one chunk when n < 2 * minChunk), of sizes that differ by one at most; the
  /// calling thread takes the first. Returns when all are done.
  void parallelFor(int64_t n, int64_t minChunk, const std::function<void(int64_t, int64_t)> &body);

  /// The process-wide pool: $MOEC_THREADS threads (1 to 1024), else one per hardware thread.
  static ThreadPool &shared();

private:
  void workerLoop();

  std::vector<std::thread> workers;
  std::mutex callMutex; // one parallelFor at a time
  std::mutex mutex;
  std::condition_variable wake, done;
  const std::function<void(int64_t, int64_t)> *job = nullptr;
  int64_t jobItems = 0, jobParts = 0, nextPart = 0; // a worker takes part nextPart++ while parts are left
  unsigned pending = 0; // parts taken by workers and not finished yet
  bool stopping = false;
};

} // namespace moec
