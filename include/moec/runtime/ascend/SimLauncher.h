//===- SimLauncher.h - Running tiled Ascend kernels on the UB simulator -*- C++ -*-===//
//
// A tiled kernel compiled for the CPU (Target::ascendSimulator) is launched core by core, as an Ascend
// launch of blockDim cores would run it: blockDim = min(vector cores, rows), each core with its own UB
// arena in a UbSimulator. The kernel reaches the simulator through the hook table of SimHooks.h. After the
// launch every row must be finished exactly once, by the core the plan's split gives it (the first
// rows % blockDim cores one row more), and every buffer released; the first problem is thrown as a
// UbError naming the kernel, the core and the buffer or tensor.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/CpuLauncher.h"
#include "moec/runtime/Tensor.h"
#include "moec/runtime/ascend/UbSimulator.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace moec::ascend {

/// What one simulated launch did, core by core.
struct SimulatedLaunch {
  std::string kernel;
  int64_t rows = 0;
  std::vector<UbSimulator::CoreStats> cores; // blockDim of them; none when there were no rows
};

/// Runs `kernel` (packed entry point; its arguments are `pointers`, `scalars`, then the hook table, the
/// core index and the core count) over `rows` rows on `chip`'s cores. `tensors` are the launch's GM
/// tensors: every DataCopy must stay inside one of them.
SimulatedLaunch launchSimulated(const Chip &chip, const std::string &name, PackedKernelFn kernel,
                                const std::vector<void *> &pointers, const std::vector<int64_t> &scalars,
                                int64_t rows, const std::map<std::string, TensorView> &tensors);

/// The simulated launches of a run, in order (several threads may launch).
class SimulationLog {
public:
  void add(SimulatedLaunch launch);
  std::vector<SimulatedLaunch> launches() const;

private:
  mutable std::mutex mutex;
  std::vector<SimulatedLaunch> log;
};

} // namespace moec::ascend
