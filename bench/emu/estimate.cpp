//===- estimate.cpp - The emulator's counts for every kernel of a bundle ---===//
//
// moec-emu-estimate BUNDLE_DIR [FIRST [COUNT]]: for every entry of a bundle (bench/gpu/prepare.sh's), and
// B2's active_num mode as moec-gpu-check times it, runs the production-size call of spec §8.1 once on the
// PTX emulator and prints one JSON line: the call's minimum traffic and each launch's counts (sectors,
// instructions, the latency timeline's cycles, registers from ptxas, resident warps, makespan), the bound's
// fraction of copy and the calibrated estimate's. bench/emu/calibrate.py turns the counts into an estimate
// under the model's parameters and fits those to the GPU's measured cells; bench/gpu/prepare.sh (ESTIMATE=1)
// keeps the lines with the bundle, so that moec-gpu-check prints the estimate beside each measurement.
//
// The inputs are those moec-gpu-check times (moec/cases/Cases.h, fixed seed), so the counts are of the
// calls a GPU ran. To count the kernels of an older commit, calibrate.py --regenerate builds this file in
// that commit's runtime-only tree, with today's emulator copied over its own: that commit's bundle format,
// launch geometry and inputs, today's counts. Hence the fallback include below, and nothing used here
// that such a tree lacks.
//
// Kernels that share a workspace (A3: a fill skips the rows a scatter marked) run every block: a sample of
// one would leave the next one's rows wrong. Others run a sample of 256 blocks, counts scaled, as moec bench
// does.
//===----------------------------------------------------------------------===//
#if __has_include("moec/cases/Cases.h")
#include "moec/cases/Cases.h"
#else
#include "Cases.h" // a tree from before moec/cases (bench/gpu/Cases.h)
#endif

#include "moec/runtime/Bundle.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/ptxemu/EmuDriver.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

namespace {

using namespace moec;

int64_t staticOr(const Bundle::Entry &e, const char *name, int64_t fallback = 0) {
  auto it = e.statics.find(name);
  return it == e.statics.end() ? fallback : it->second;
}

nlohmann::json launchJson(const ptxemu::Profile &p) {
  nlohmann::json classes = nlohmann::json::object();
  for (int i = 0; i < ptxemu::kInstrClasses; ++i)
    if (p.warpInstructions[size_t(i)] > 0)
      classes[ptxemu::className(ptxemu::InstrClass(i))] = p.warpInstructions[size_t(i)];
  return {{"kernel", p.kernel},
          {"grid", {p.grid.x, p.grid.y, p.grid.z}},
          {"block", {p.block.x, p.block.y, p.block.z}},
          {"blocks", p.blocks},
          {"blocks_run", p.blocksRun},
          {"warp_instructions", p.totalWarpInstructions()},
          {"by_class", classes},
          {"load_requests", p.globalLoadRequests},
          {"store_requests", p.globalStoreRequests},
          {"load_sectors", p.loadSectors},
          {"store_sectors", p.storeSectors},
          {"load_bytes", p.loadBytes},
          {"store_bytes", p.storeBytes},
          {"warp_cycles", p.warpCycles},
          {"makespan_cycles", ptxemu::makespanCycles(p)},
          {"max_block_cycles", p.blockCycles.empty() ? 0 : *std::max_element(p.blockCycles.begin(), p.blockCycles.end())},
          {"registers", p.registers},
          {"warps_per_sm", ptxemu::residentWarpsPerSm(p)}};
}

/// One JSON line for entry `e` (B2's active_num mode when `active`).
nlohmann::json estimateEntry(const Bundle::Entry &e, const Kernel &kernel, bool active) {
  const CudaDriver &emu = CudaDriver::emulator();
  std::mt19937 rng(12345);
  int64_t tokens = gpucheck::productionTokens(staticOr(e, "H"));
  gpucheck::Case big = gpucheck::caseFor(e.op, e.dtype, e.statics, e.present, tokens, active, rng, false);
  ptxemu::LaunchOptions options = ptxemu::launchOptions();
  options.sampleBlocks = e.workspace.empty() ? 256 : 0;
  options.registersFromPtxas = true;
  ptxemu::setLaunchOptions(options);
  gpucheck::DeviceCall call(emu, big);
  ptxemu::takeProfiles();
  kernel.launch(call.tensors, nullptr, big.attrs);
  nlohmann::json launches = nlohmann::json::array();
  std::vector<ptxemu::Profile> profiles = ptxemu::takeProfiles();
  for (const ptxemu::Profile &p : profiles)
    launches.push_back(launchJson(p));
  double seconds = ptxemu::boundSeconds(profiles), estimate = ptxemu::estimatedSeconds(profiles);
  return {{"op", e.op},
          {"dtype", dsl::dtypeName(e.dtype)},
          {"mode", gpucheck::modeName(e.statics, e.present, active)},
          {"H", staticOr(e, "H")},
          {"E", staticOr(e, "E")},
          {"K", staticOr(e, "K", staticOr(e, "top_k"))},
          {"tokens", tokens},
          {"bytes", big.bytesMoved},
          {"fraction_of_copy", seconds > 0 ? (big.bytesMoved / ptxemu::GpuModel{}.bandwidth) / seconds : 0},
          {"estimate", estimate > 0 ? (big.bytesMoved / ptxemu::GpuModel{}.bandwidth) / estimate : 0},
          {"launches", launches}};
}

} // namespace

/// A count argument: a whole number, or nullopt.
static std::optional<size_t> countArgument(const char *text) {
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (!*text || *end || errno || std::strchr(text, '-'))
    return std::nullopt;
  return size_t(value);
}

int main(int argc, char **argv) {
  const char *usage = "usage: moec-emu-estimate BUNDLE_DIR [FIRST [COUNT]]: entries FIRST .. FIRST + COUNT - 1 "
                      "(all by default), a JSON line each\n";
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << usage;
    return 0;
  }
  if (argc < 2 || argc > 4) {
    std::cerr << usage;
    return 2;
  }
  std::optional<size_t> first = argc > 2 ? countArgument(argv[2]) : size_t(0);
  std::optional<size_t> count = argc > 3 ? countArgument(argv[3]) : std::numeric_limits<size_t>::max();
  if (!first || !count) {
    std::cerr << "moec-emu-estimate: FIRST and COUNT must be whole numbers, not '" << argv[!first ? 2 : 3] << "'\n"
              << usage;
    return 2;
  }
  try {
    const CudaDriver &emu = CudaDriver::emulator();
    std::unique_ptr<Bundle> bundle = Bundle::open(argv[1], emu);
    for (size_t index = *first; index < bundle->entries().size() && index - *first < *count; ++index) {
      const Bundle::Entry &e = bundle->entries()[index];
      Kernel kernel = bundle->get(index);
      for (bool active : {false, true}) {
        if (active && (e.op != "moe_init_routing_v2_grad" || staticOr(e, "drop_pad_mode")))
          continue;
        std::printf("%s\n", estimateEntry(e, kernel, active).dump().c_str());
        std::fflush(stdout);
      }
    }
  } catch (const std::exception &ex) {
    std::cerr << "moec-emu-estimate: error: " << ex.what() << "\n";
    return 1;
  }
  return 0;
}
