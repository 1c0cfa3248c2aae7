//===- CpuBaseline.h - A case's CPU kernels against a same-run memcpy ----*- C++ -*-===//
//
// Shared by `moec bench --target cpu` and bench/CpuKernelBench.cpp: the tensors a case's kernels run on,
// and the baseline they are compared with, a memcpy of half the case's minimum traffic (a copy reads and
// writes each byte once) split over the same thread pool as the kernels, in chunks of at least 1 MiB.
//===----------------------------------------------------------------------===//
#pragma once

#include "Cases.h"

#include "moec/runtime/Tensor.h"
#include "moec/runtime/ThreadPool.h"

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

/// Wall-clock seconds of one call of `f`.
template <typename F> double secondsOf(F &&f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace moec::gpucheck
