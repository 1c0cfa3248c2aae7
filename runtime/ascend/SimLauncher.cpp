//===- SimLauncher.cpp - Tiled Ascend kernels, core by core, on the UB simulator ---===//
#include "moec/runtime/ascend/SimLauncher.h"

#include "moec/contracts/ascend/SimHooks.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace moec::ascend {
namespace {

/// The hooks' state: the simulator, and the first error a hook met. A hook never throws through the
/// kernel's frames: it records the error and lets the kernel finish harmlessly (a failed placement gets
/// scratch memory of the size asked, a failed copy moves nothing); the launcher then throws it.
struct HookState {
  UbSimulator *simulator;
  std::optional<std::string> error;
  std::vector<std::unique_ptr<uint8_t[]>> scratch;

  template <typename F> auto guarded(F &&f) -> decltype(f()) {
    if (error)
      return decltype(f())();
    try {
      return f();
    } catch (const std::exception &e) {
      error = e.what();
      return decltype(f())();
    }
  }
};

HookState &state(void *simulator) { return *static_cast<HookState *>(simulator); }

void *place(void *simulator, int64_t core, const char *name, int64_t offset, int64_t bytes) {
  HookState &s = state(simulator);
  void *memory = s.guarded([&]() -> void * { return s.simulator->place(core, name, offset, bytes); });
  if (!memory) // after an error: memory the kernel can use without harm
    memory = s.scratch.emplace_back(std::make_unique<uint8_t[]>(size_t(std::max<int64_t>(bytes, 1)))).get();
  return memory;
}

void release(void *simulator, int64_t core, const char *name) {
  HookState &s = state(simulator);
  s.guarded([&] { s.simulator->release(core, name); });
}

void copy(void *simulator, int64_t core, int64_t toUb, void *ub, void *gm, int64_t bytes) {
  HookState &s = state(simulator);
  s.guarded([&] {
    if (toUb)
      s.simulator->copyIn(core, static_cast<uint8_t *>(ub), gm, bytes);
    else
      s.simulator->copyOut(core, gm, static_cast<const uint8_t *>(ub), bytes);
  });
}

void rowDone(void *simulator, int64_t core, int64_t row) {
  HookState &s = state(simulator);
  s.guarded([&] { s.simulator->finishRow(core, row); });
}

void scalarRead(void *simulator, int64_t core, int64_t bytes) {
  HookState &s = state(simulator);
  s.guarded([&] { s.simulator->scalarRead(core, bytes); });
}

} // namespace

SimulatedLaunch launchSimulated(const Chip &chip, const std::string &name, PackedKernelFn kernel,
                                const std::vector<void *> &pointers, const std::vector<int64_t> &scalars,
                                int64_t rows, const std::map<std::string, TensorView> &tensors) {
  SimulatedLaunch launch{name, rows, {}};
  if (rows <= 0)
    return launch; // no core has work: nothing is launched
  int64_t cores = std::min<int64_t>(chip.vectorCores, rows);
  auto fail = [&](const std::string &what) { throw UbError("kernel '" + name + "': " + what); };
  try {
    UbSimulator simulator(chip, cores, rows);
    for (const auto &[tensor, view] : tensors)
      if (view.data)
        simulator.addGlobal(tensor, view.data, view.elements() * dsl::dtypeBytes(view.dtype));
    HookState hookState{&simulator, std::nullopt, {}};
    UbHooks hooks{&hookState, place, release, copy, rowDone, scalarRead};
    for (int64_t core = 0; core < cores; ++core) {
      std::vector<void *> values(pointers);
      void *table = &hooks;
      std::vector<int64_t> ints(scalars);
      ints.push_back(core);
      ints.push_back(cores);
      std::vector<void *> args;
      for (void *&p : values)
        args.push_back(&p);
      for (size_t i = 0; i < scalars.size(); ++i)
        args.push_back(&ints[i]);
      args.push_back(&table);
      args.push_back(&ints[scalars.size()]);
      args.push_back(&ints[scalars.size() + 1]);
      kernel(args.data());
      if (hookState.error)
        fail(*hookState.error);
    }
    simulator.finish();
    for (int64_t core = 0; core < cores; ++core) {
      const UbSimulator::CoreStats &stats = simulator.stats(core);
      int64_t expected = rows / cores + (core < rows % cores ? 1 : 0);
      if (stats.rows != expected)
        fail("core " + std::to_string(core) + " finished " + std::to_string(stats.rows) + " rows; the plan's split gives it " +
             std::to_string(expected));
      launch.cores.push_back(stats);
    }
  } catch (const UbError &e) {
    std::string what = e.what();
    if (what.rfind("kernel '", 0) == 0)
      throw;
    fail(what);
  }
  return launch;
}

int64_t liveRows(const SimulatedLaunch &launch, bool pointRows) {
  int64_t live = 0;
  for (const UbSimulator::CoreStats &c : launch.cores)
    live += c.rowsCopyingIn + (pointRows ? 0 : c.rowsCopyingOutOnly);
  return live;
}

LaunchReport reportLaunch(const SimulatedLaunch &launch, const Chip &chip, const KernelTiling *tiling) {
  LaunchReport r;
  r.kernel = launch.kernel;
  r.cores = int64_t(launch.cores.size());
  r.rows = launch.rows;
  double total = 0;
  for (size_t i = 0; i < launch.cores.size(); ++i) {
    const UbSimulator::CoreStats &c = launch.cores[i];
    r.fewestRows = i == 0 ? c.rows : std::min(r.fewestRows, c.rows);
    r.mostRows = std::max(r.mostRows, c.rows);
    r.dataCopies += c.dataCopies;
    r.bytes += c.bytesIn + c.bytesOut + c.scalarBytes;
    r.scalarReads += c.scalarReads;
    r.peakUbBytes = std::max(r.peakUbBytes, c.peakUbBytes);
    CoreWork work;
    work.rows = c.rows;
    work.dataCopies = c.dataCopies;
    work.scalarReads = c.scalarReads;
    work.gmBytes = c.bytesIn + c.bytesOut + c.scalarBytes;
    if (tiling) { // the tiled kernels stage a row at a time, chunk by chunk
      work.bufferCount = tiling->bufferCount;
      work.passes = c.rows * tiling->chunks;
    }
    double ns = coreCostNs(chip, work);
    r.busiestCoreNs = std::max(r.busiestCoreNs, ns);
    total += ns;
  }
  r.meanCoreNs = r.cores ? total / double(r.cores) : 0;
  return r;
}

std::string reportTable(const std::vector<SimulatedLaunch> &launches, const Chip &chip,
                        const std::vector<KernelTiling> &tilings) {
  std::string text = fmt::format("{:<48} {:>6} {:>9} {:>11} {:>10} {:>10} {:>12} {:>11} {:>12} {:>8}\n",
                                 "kernel (" + chip.name + ")", "cores", "rows", "rows/core", "DataCopy", "scalars",
                                 "GM bytes", "peak UB", "busiest us", "balance");
  std::vector<KernelPlan> kernels; // what planLaunches needs of each: its rows, cores and busiest core
  for (const SimulatedLaunch &launch : launches) {
    auto tiling = std::find_if(tilings.begin(), tilings.end(),
                               [&](const KernelTiling &t) { return t.kernel == launch.kernel; });
    LaunchReport r = reportLaunch(launch, chip, tiling == tilings.end() ? nullptr : &*tiling);
    KernelPlan &k = kernels.emplace_back();
    k.tiling.kernel = r.kernel;
    k.rows = r.rows;
    k.blockDim = r.cores;
    k.costNs = r.busiestCoreNs;
    text += fmt::format("{:<48} {:>6} {:>9} {:>11} {:>10} {:>10} {:>12} {:>11} {:>12.1f} {:>8.3f}\n", r.kernel, r.cores,
                        r.rows, fmt::format("{}-{}", r.fewestRows, r.mostRows), r.dataCopies, r.scalarReads, r.bytes,
                        fmt::format("{}/{}", r.peakUbBytes, chip.ubBytes), r.busiestCoreNs / 1e3, r.balance());
  }
  std::vector<LaunchPlan> grouped = planLaunches(chip, kernels);
  double total = 0;
  for (const LaunchPlan &l : grouped)
    total += l.costNs;
  text += grouped.size() < kernels.size()
              ? fmt::format("total (one launch, the kernels its stages with a SyncAll between, each its busiest "
                            "core): {:.1f} us\n",
                            total / 1e3)
              : fmt::format("total (kernels in order, each its busiest core): {:.1f} us\n", total / 1e3);
  return text;
}

void SimulationLog::add(SimulatedLaunch launch) {
  std::lock_guard<std::mutex> lock(mutex);
  log.push_back(std::move(launch));
}

std::vector<SimulatedLaunch> SimulationLog::launches() const {
  std::lock_guard<std::mutex> lock(mutex);
  return log;
}

CpuKernelLauncher simulatorLauncher(const Chip &chip, std::vector<std::string> kernelNames,
                                    std::shared_ptr<SimulationLog> log) {
  return [chip, names = std::move(kernelNames), log](size_t k, PackedKernelFn fn, const std::vector<void *> &pointers,
                                                     const std::vector<int64_t> &scalars, int64_t rows,
                                                     const std::map<std::string, TensorView> &tensors) {
    SimulatedLaunch launch = launchSimulated(chip, names.at(k), fn, pointers, scalars, rows, tensors);
    if (log)
      log->add(std::move(launch));
  };
}

} // namespace moec::ascend
