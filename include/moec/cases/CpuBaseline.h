//===- CpuBaseline.h - A case's CPU kernels against a same-run memcpy ----*- C++ -*-===//
//
// Shared by `moec bench --target cpu` and bench/CpuKernelBench.cpp: the tensors a case's kernels run on,
// and the baseline they are compared with, a memcpy of half the case's minimum traffic (a copy reads and
// writes each byte once) split over the same thread pool as the kernels, in chunks of at least 1 MiB; and a
// pass that only reads the case's read bytes, the bound of what a kernel can reach against that memcpy.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/cases/Cases.h"

#include "moec/runtime/Tensor.h"
#include "moec/runtime/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

namespace moec::gpucheck {

/// A case's inputs, and fresh outputs shaped like its expected ones, by name.
struct CaseTensors {
  explicit CaseTensors(Case &c) {
    for (auto &[name, t] : c.inputs)
      views[name] = t.view();
    for (auto &[name, t] : c.expected)
      views[name] = outputs.emplace(name, HostTensor(t.type(), t.dims())).first->second.view();
  }
  std::map<std::string, TensorView> views;
  std::map<std::string, HostTensor> outputs;
};

/// The baseline: copies half of `c.bytesMoved` bytes on the shared pool.
class MemcpyBaseline {
public:
  explicit MemcpyBaseline(const Case &c) : src(size_t(c.bytesMoved / 2), 1), dst(src.size()) {}
  void operator()() {
    ThreadPool::shared().parallelFor(int64_t(src.size()), kChunk, [&](int64_t begin, int64_t end) {
      std::memcpy(dst.data() + begin, src.data() + begin, size_t(end - begin));
    });
  }

private:
  static constexpr int64_t kChunk = 1 << 20;
  std::vector<uint8_t> src, dst;
};

/// A bound next to the baseline: one pass that only reads as many bytes as the case reads (its minimum
/// traffic less what it writes), split over the shared pool like the memcpy. Each worker's chunk is read as
/// kStreams streams side by side, each prefetched kPrefetchWords ahead: one stream reads at 11 GB/s on the
/// 2-core Xeon VM, 8 prefetched ones at 17.5 (a hand-written AVX-512 probe with the L3 flushed first; more
/// streams or a longer distance read no faster). The memcpy moves 25 GB/s there (read + written), so an op
/// that mostly reads (B2, C2) cannot reach it on one thread: `copy time / read time` is the most it can.
class ReadBaseline {
public:
  explicit ReadBaseline(const Case &c)
      : src(size_t(std::max(c.bytesMoved - c.bytesWritten, 0.0)) / sizeof(uint64_t), 1) {}
  void operator()() {
    ThreadPool::shared().parallelFor(int64_t(src.size()), kChunk, [&](int64_t begin, int64_t end) {
      uint64_t acc[kLineWords] = {};
      const uint64_t *at = src.data() + begin;
      int64_t length = (end - begin) / (kStreams * kLineWords) * kLineWords; // whole lines in each stream
      for (int64_t i = 0; i < length; i += kLineWords)
        for (int64_t s = 0; s < kStreams; ++s) {
          const uint64_t *line = at + s * length + i;
          __builtin_prefetch(line + std::min(kPrefetchWords, length - i - 1));
          for (int64_t w = 0; w < kLineWords; ++w)
            acc[w] += line[w];
        }
      uint64_t sum = 0;
      for (int64_t i = begin + kStreams * length; i < end; ++i) // the rest, one stream
        sum += src[size_t(i)];
      for (uint64_t a : acc)
        sum += a;
      sink.fetch_add(sum, std::memory_order_relaxed); // the sum goes to memory: the reads stay
    });
  }

private:
  static constexpr int64_t kChunk = (1 << 20) / sizeof(uint64_t);
  static constexpr int64_t kLineWords = 64 / sizeof(uint64_t);
  static constexpr int64_t kStreams = 8;
  static constexpr int64_t kPrefetchWords = 768 / sizeof(uint64_t);
  std::vector<uint64_t> src;
  std::atomic<uint64_t> sink{0};
};

/// Wall-clock seconds of one call of `f`.
template <typename F> double secondsOf(F &&f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace moec::gpucheck
