//===- ThreadPool.cpp --------------------------------------------------------===//
#include "moec/runtime/ThreadPool.h"

#include <algorithm>
#include <cstdlib>

namespace moec {

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i)
    workers.emplace_back([this, i] { workerLoop(i); });
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

void ThreadPool::workerLoop(unsigned index) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex);
    wake.wait(lock, [&] { return stopping || generation != seen; });
    if (stopping)
      return;
    seen = generation;
    const auto *body = job;
    int64_t begin = index * jobChunk, end = std::min(jobItems, begin + jobChunk);
    lock.unlock();
    if (begin < end)
      (*body)(begin, end);
    lock.lock();
    if (--pending == 0)
      done.notify_one();
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t minChunk, const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  int64_t chunk = std::max<int64_t>({minChunk, 1, (n + size() - 1) / size()});
  if (workers.empty() || chunk >= n) {
    body(0, n);
    return;
  }
  std::lock_guard<std::mutex> call(callMutex);
  {
    std::lock_guard<std::mutex> lock(mutex);
    job = &body;
    jobItems = n;
    jobChunk = chunk;
    pending = static_cast<unsigned>(workers.size());
    ++generation;
  }
  wake.notify_all();
  body(0, std::min(n, chunk));
  std::unique_lock<std::mutex> lock(mutex);
  done.wait(lock, [&] { return pending == 0; });
}

} // namespace moec
