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
#include "moec/runtime/Kernel.h"
#include "moec/runtime/Tensor.h"
#include "moec/runtime/ascend/Plan.h"
#include "moec/runtime/ascend/UbSimulator.h"

#include <map>
#include <memory>
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

/// The rows of `launch` that did their work, as a plan's live rows (PlanRequest::liveRows): a row that
/// failed its guard moves nothing, and a point (`pointRows`: a reduction along each) only its output. So:
/// the rows that made any DataCopy, or for points those that copied data in.
int64_t liveRows(const SimulatedLaunch &launch, bool pointRows);

/// What a simulated launch costs under the chip's cost model (Plan.h's coreCostNs), from its counts, the
/// launch its busiest core. With the kernel's `tiling`, its buffering: a double-buffered kernel's passes
/// (each row's chunks: the tiled kernels stage a row at a time) overlap; without, every core is serial.
struct LaunchReport {
  std::string kernel;
  int64_t cores = 0, rows = 0;
  int64_t fewestRows = 0, mostRows = 0; // per core
  int64_t dataCopies = 0, scalarReads = 0, bytes = 0; // all cores; bytes: DataCopy and scalar
  int64_t peakUbBytes = 0;              // the most any core had placed
  double busiestCoreNs = 0, meanCoreNs = 0;
  /// mean / busiest core time: 1 when every core has the same work.
  double balance() const { return busiestCoreNs > 0 ? meanCoreNs / busiestCoreNs : 1; }
};
LaunchReport reportLaunch(const SimulatedLaunch &launch, const Chip &chip, const KernelTiling *tiling = nullptr);

/// A readable table of `launches`, a line per kernel, and their total cost; `tilings`: the kernels' (by name).
std::string reportTable(const std::vector<SimulatedLaunch> &launches, const Chip &chip,
                        const std::vector<KernelTiling> &tilings = {});

/// The simulated launches of a run, in order (several threads may launch).
class SimulationLog {
public:
  void add(SimulatedLaunch launch);
  std::vector<SimulatedLaunch> launches() const;

private:
  mutable std::mutex mutex;
  std::vector<SimulatedLaunch> log;
};

/// A LoadedOp::cpuLauncher that runs kernel k (named kernelNames[k]) on the simulator; `log`, if set,
/// keeps what each launch did.
CpuKernelLauncher simulatorLauncher(const Chip &chip, std::vector<std::string> kernelNames,
                                    std::shared_ptr<SimulationLog> log = nullptr);

} // namespace moec::ascend
