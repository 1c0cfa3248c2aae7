//===- TuneCalls.h - A case's call, ready for the Tuner, on the CPU or a GPU -*- C++ -*-===//
//
// Shared by `moec tune` and the tuner's tests: a case's tensors (moec/cases/Cases.h), its baseline (a
// copy of the same bytes on the same hardware), output poisoning and read-back for the bit-for-bit check,
// a timer, and a cache flush between timed runs. On Ascend the plan's cost on the chip takes the timer's
// place, and the chip's bandwidth bound the copy's.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/cases/Cases.h"
#include "moec/cases/CpuBaseline.h"

#include "moec/jit/AscendPlanner.h"
#include "moec/jit/CpuRun.h"
#include "moec/jit/Tuner.h"
#include "moec/runtime/Binding.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/DeviceTensors.h"
#include "moec/runtime/ThreadPool.h"
#include "moec/runtime/ascend/SimLauncher.h"

#include <cstring>
#include <unistd.h>

namespace moec::gpucheck {

/// Bytes that evict the last-level cache when written: 64 MiB, or twice the L3 where the system says.
inline size_t flushBytes() {
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::max<size_t>(size_t(64) << 20, l3 > 0 ? 2 * size_t(l3) : 0);
}

/// A CPU call: the case's tensors, a memcpy baseline on the same pool, and a cache flush.
class CpuTuneCall {
public:
  /// `flushWith`: bytes written between timed runs to evict the caches (0: none).
  explicit CpuTuneCall(Case c, size_t flushWith = flushBytes())
      : c(std::move(c)), tensors(this->c), memcpy(this->c), flushBuffer(flushWith) {
    call.tensors = tensors.views;
    call.attrs = this->c.attrs;
    call.bytesMoved = this->c.bytesMoved;
    call.baseline = [this] { memcpy(); };
    call.poisonOutputs = [this] {
      for (auto &[name, t] : tensors.outputs)
        std::memset(t.raw(), 0xFF, t.bytes());
    };
    call.outputBytes = [this] {
      std::string bytes;
      for (const auto &[name, t] : tensors.outputs)
        bytes.append(static_cast<const char *>(t.raw()), t.bytes());
      return bytes;
    };
    call.secondsOf = [](const std::function<void()> &f) { return secondsOf(f); };
    call.flush = [this] {
      ++flushValue;
      ThreadPool::shared().parallelFor(int64_t(flushBuffer.size()), 1 << 20, [&](int64_t begin, int64_t end) {
        std::memset(flushBuffer.data() + begin, flushValue, size_t(end - begin));
      });
    };
  }
  TuneCall call;

private:
  Case c;
  CaseTensors tensors;
  MemcpyBaseline memcpy;
  std::vector<uint8_t> flushBuffer;
  uint8_t flushValue = 0;
};

/// A GPU call: the case's tensors on the device, a device-to-device copy baseline, CUDA events, and a
/// flush that overwrites more than the L2.
class GpuTuneCall {
public:
  GpuTuneCall(const CudaDriver &driver, Case c)
      : driver(driver), c(std::move(c)), device(driver, this->c), scratch(driver) {
    size_t half = std::max<size_t>(size_t(this->c.bytesMoved / 2), 256);
    copySrc = bytesOn(half);
    copyDst = bytesOn(half);
    copyBytes = half;
    flushBuffer = bytesOn(kFlushBytes);
    call.tensors = device.tensors;
    call.attrs = this->c.attrs;
    call.bytesMoved = this->c.bytesMoved;
    call.baseline = [this] {
      this->driver.check(this->driver.api().memcpyDtoDAsync(copyDst, copySrc, copyBytes, nullptr), "cuMemcpyDtoDAsync");
    };
    call.poisonOutputs = [this] {
      for (const auto &[name, t] : this->c.expected)
        this->driver.check(this->driver.api().memsetD8Async(reinterpret_cast<CUdeviceptr>(device.tensors.at(name).data),
                                                            0xFF, t.bytes(), nullptr),
                           "cuMemsetD8Async");
      this->driver.check(this->driver.api().ctxSynchronize(), "cuCtxSynchronize");
    };
    call.outputBytes = [this] {
      std::string bytes;
      for (const auto &[name, t] : this->c.expected) {
        HostTensor h = device.download(name);
        bytes.append(static_cast<const char *>(h.raw()), h.bytes());
      }
      return bytes;
    };
    call.secondsOf = [this](const std::function<void()> &f) { return eventSeconds(this->driver, f); };
    call.flush = [this] {
      this->driver.check(this->driver.api().memsetD8Async(flushBuffer, ++flushValue, kFlushBytes, nullptr),
                         "cuMemsetD8Async");
    };
  }
  TuneCall call;

private:
  CUdeviceptr bytesOn(size_t bytes) {
    return reinterpret_cast<CUdeviceptr>(scratch.allocate(DType::I8, {int64_t(bytes)}).data);
  }

  static constexpr size_t kFlushBytes = size_t(256) << 20; // over 4x an H200's 50 MB L2
  const CudaDriver &driver;
  Case c;
  DeviceCall device;
  DeviceTensors scratch;
  CUdeviceptr copySrc = 0, copyDst = 0, flushBuffer = 0;
  size_t copyBytes = 0;
  uint8_t flushValue = 0;
};

/// An Ascend call: the case's tensors on the host, where the tiled kernels run on the UB simulator for
/// the bit-for-bit check, and the cost of the plan each config gives this call on the chip (its routing's
/// live rows included) in place of a clock (TuneCall::modeledSeconds). `planner` should not use tuning
/// files (Options::autotune = false), so that Schedule{} plans with the compiler's choices.
class AscendTuneCall {
  CpuTuneCall host; // first: `call` refers into it

public:
  AscendTuneCall(Case c, AscendPlanner &planner, const std::string &op, DType dtype, const std::set<std::string> &with)
      : host(std::move(c), /*flushWith=*/0) {
    std::unique_ptr<dsl::OpDef> def = loadOp(op);
    std::map<std::string, TensorView> inputs;
    for (const auto &[name, view] : host.call.tensors)
      if (const dsl::TensorDecl *t = def->findTensor(name); t && !t->isOutput)
        inputs[name] = view;
    BoundCall bound = bindCall(*def, dtype, host.call.attrs, inputs);
    // A guarded kernel's live rows (A3's routed (token, expert) pairs, of Tk x E) are the routing's: read
    // off the heuristic's tiled kernels on the simulator. Every config runs the same rows.
    std::map<std::string, int64_t> live;
    CpuRunResult simulated = runOnAscendSimulator(*def, dtype, host.call.attrs, inputs, planner.chip(), Schedule{});
    for (const ascend::SimulatedLaunch &launch : simulated.simulated)
      for (const ascend::KernelTiling &t : simulated.tilings)
        if (t.kernel == launch.kernel)
          live[launch.kernel] = ascend::liveRows(launch, t.pointRows);
    PlanCall base{dtype, bound.dims, bound.attrs, with, live, {}};
    host.call.modeledSeconds = [&planner, op, base](const Schedule &config) {
      PlanCall call = base;
      call.schedule = config;
      return planner.plan(op, call)->costNs * 1e-9;
    };
    host.call.modeledBaselineSeconds = ascend::copyBoundNs(planner.chip(), host.call.bytesMoved) * 1e-9;
  }
  TuneCall &call = host.call;
};

} // namespace moec::gpucheck
