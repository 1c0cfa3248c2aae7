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

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace moec {

class CudaContext;
class CudaDriver;
struct LoadedOp;

/// The specializations runOnCpu and runOnDevice compiled, kept for the next call with the same op object,
/// specialization and driver: a test that runs one specialization at several token counts compiles it once,
/// as a Runtime would. Keyed by the OpDef's address, since the kernels point into the OpDef they were
/// compiled from: the caller keeps every op it runs alive as long as the cache (a test's static ops).
class CompiledRuns {
public:
  struct Entry {
    std::shared_ptr<const LoadedOp> loaded;
    StageTimes times;
    std::shared_ptr<const CudaContext> context; // runOnDevice: the context the module is loaded in
  };
  /// The entry for `key` (op and specialization), made by `make` on the first call.
  std::shared_ptr<const Entry> get(const std::string &key, const std::function<Entry()> &make);
  /// The specializations compiled so far.
  size_t size();

private:
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const Entry>> entries;
};

struct CpuRunResult {
  std::map<std::string, HostTensor> outputs;
  StageTimes compileTimes;
  std::vector<ascend::SimulatedLaunch> simulated; // runOnAscendSimulator: each kernel's launch, core by core
  std::vector<ascend::KernelTiling> tilings;      // runOnAscendSimulator: each kernel's static tiling
};

/// Throws ArgumentError for a call that does not fit the op, CompileError if compiling fails.
/// With `reuse`, a specialization compiled before for the same op object is run again (CompiledRuns).
CpuRunResult runOnCpu(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                      const std::map<std::string, TensorView> &inputs, const Schedule &schedule = {},
                      CompiledRuns *reuse = nullptr);

/// The same through the GPU path: compiled for `target` (ptx), the host inputs copied to `driver`'s device
/// (a GPU, or CudaDriver::emulator()), launched with Kernel::launch, the outputs copied back.
CpuRunResult runOnDevice(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                         const std::map<std::string, TensorView> &inputs, const Schedule &schedule,
                         const Target &target, const CudaDriver &driver, CompiledRuns *reuse = nullptr);

/// The same through the Ascend target: the tiled kernels for `chip`, compiled for the CPU and launched
/// core by core on the UB simulator (ascend/SimLauncher.h), which checks every buffer and copy and
/// counts them. Throws ascend::UbError for what a real core would get wrong.
CpuRunResult runOnAscendSimulator(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                                  const std::map<std::string, TensorView> &inputs, const ascend::Chip &chip,
                                  const Schedule &schedule = {});

} // namespace moec
