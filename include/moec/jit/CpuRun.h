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
#include "moec/runtime/ascend/SimLauncher.h"

#include <map>
#include <string>

namespace moec {

class CudaDriver;

struct CpuRunResult {
  std::map<std::string, HostTensor> outputs;
  StageTimes compileTimes;
  std::vector<ascend::SimulatedLaunch> simulated; // runOnAscendSimulator: each kernel's launch, core by core
  std::vector<ascend::KernelTiling> tilings;      // runOnAscendSimulator: each kernel's static tiling
};

/// Throws ArgumentError for a call that does not fit the op, CompileError if compiling fails.
CpuRunResult runOnCpu(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                      const std::map<std::string, TensorView> &inputs, const Schedule &schedule = {});

/// The same through the GPU path: compiled for `target` (ptx), the host inputs copied to `driver`'s device
/// (a GPU, or CudaDriver::emulator()), launched with Kernel::launch, the outputs copied back.
CpuRunResult runOnDevice(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                         const std::map<std::string, TensorView> &inputs, const Schedule &schedule,
                         const Target &target, const CudaDriver &driver);

/// The same through the Ascend target: the tiled kernels for `chip`, compiled for the CPU and launched
/// core by core on the UB simulator (ascend/SimLauncher.h), which checks every buffer and copy and
/// counts them. Throws ascend::UbError for what a real core would get wrong.
CpuRunResult runOnAscendSimulator(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                                  const std::map<std::string, TensorView> &inputs, const ascend::Chip &chip,
                                  const Schedule &schedule = {});

} // namespace moec
