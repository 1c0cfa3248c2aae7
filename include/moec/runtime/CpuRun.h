//===- CpuRun.h - Compile and run an op on host tensors ----------*- C++ -*-===//
//
// The JIT path of the runtime for the CPU target: bind and check the call, compile the specialization,
// run every kernel on the thread pool, return the outputs. Lives in moec_jit (it links the compiler);
// the loader/launcher part of the runtime does not.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/compiler/Pipeline.h"
#include "moec/runtime/Binding.h"
#include "moec/runtime/HostTensor.h"

#include <map>
#include <string>

namespace moec {

class CudaDriver;

struct CpuRunResult {
  std::map<std::string, HostTensor> outputs;
  StageTimes compileTimes;
};

/// Throws ArgumentError for a call that does not fit the op, CompileError if compiling fails.
CpuRunResult runOnCpu(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                      const std::map<std::string, TensorView> &inputs, const Schedule &schedule = {});

/// The same through the GPU path: compiled for `target` (ptx), the host inputs copied to `driver`'s device
/// (a GPU, or CudaDriver::emulator()), launched with Kernel::launch, the outputs copied back.
CpuRunResult runOnDevice(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                         const std::map<std::string, TensorView> &inputs, const Schedule &schedule,
                         const Target &target, const CudaDriver &driver);

} // namespace moec
