//===- ThreadPool.cpp --------------------------------------------------------===//
#include "moec/runtime/ThreadPool.h"

#include <algorithm>
#include <cstdlib>

namespace moec {

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i)
    workers.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread &t : workers)
    t.join();
}

/// $MOEC_THREADS, when it is a whole number in [1, 1024]; else 0 (one thread per hardware thread).
static unsigned threadsFromEnvironment() {
  const char *text = std::getenv("MOEC_THREADS");
  if (!text || !*text)
    return 0;
  char *end = nullptr;
  long n = std::strtol(text, &end, 10);
  return *end == '\0' && n >= 1 && n <= 1024 ? unsigned(n) : 0;
}

ThreadPool &ThreadPool::shared() {
  static ThreadPool pool(threadsFromEnvironment());
  return pool;
}

/// Part `index` (< parts) of [0, n) split into `parts`, the first n % parts one item longer.
static std::pair<int64_t, int64_t> part(int64_t n, int64_t parts, int64_t index) {
  int64_t base = n / parts, extra = n % parts;
  int64_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

void ThreadPool::workerLoop() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    wake.wait(lock, [&] { return stopping || nextPart < jobParts; });
    if (stopping)
      return;
    const auto *body = job;
    auto [begin, end] = part(jobItems, jobParts, nextPart++);
    lock.unlock();
    (*body)(begin, end);
    lock.lock();
    if (--pending == 0)
      done.notify_one();
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t minChunk, const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  // As many chunks as hold minChunk items each (the last one too: a short tail task would wake a worker
  // for less than it costs), at most one per thread, of sizes differing by one at most.
  int64_t parts = std::clamp<int64_t>(n / std::max<int64_t>(minChunk, 1), 1, size());
  if (parts == 1) {
    body(0, n);
    return;
  }
  std::lock_guard<std::mutex> call(callMutex);
  {
    std::lock_guard<std::mutex> lock(mutex);
    job = &body;
    jobItems = n;
    jobParts = parts;
    nextPart = 1; // the calling thread runs part 0
    pending = static_cast<unsigned>(parts - 1);
  }
  // Only as many workers as there are parts left: the others sleep on.
  for (int64_t i = 1; i < parts; ++i)
    wake.notify_one();
  auto [begin, end] = part(n, parts, 0);
  body(begin, end);
  std::unique_lock<std::mutex> lock(mutex);
  done.wait(lock, [&] { return pending == 0; });
}

} // namespace moec
