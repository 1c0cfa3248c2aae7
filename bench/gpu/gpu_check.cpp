//===- gpu_check.cpp - Validates and times a bundle's kernels on a GPU ----===//
//
// Links the runtime alone (no LLVM/MLIR): a GPU machine with CMake and a CUDA driver builds and runs it
// against a bundle emitted elsewhere (bench/gpu/run.sh). For each specialization in the bundle:
//   1. check: random inputs at a small token count, the kernel's outputs against a plain C++ reference;
//   2. time: the production token count of spec §8.1 for its hidden size, CUDA events around the launch
//      after warm-up, the median, and the achieved TB/s next to a device-to-device copy of the same
//      bytes measured in the same run;
//   3. the PTX emulator's calibrated estimate for the same call, with the calibration's held-out error band
//      for the op (bench/emu/calibrate.py), next to the measurement: from BUNDLE_DIR/estimate.jsonl where
//      prepare.sh stored it (ESTIMATE=1, counted off the device's clock), else with --predict, run here.
// With MOEC_GPU=emu the whole check runs on the emulator (no timing). The table comes last.
//===----------------------------------------------------------------------===//
#include "moec/cases/Cases.h"

#include "moec/runtime/Bundle.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/ptxemu/EmuDriver.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

using namespace moec;
using namespace moec::gpucheck;

namespace {

struct DeviceBuffer {
  const CudaDriver &driver;
  CUdeviceptr ptr = 0;
  size_t bytes;
  DeviceBuffer(const CudaDriver &d, size_t n) : driver(d), bytes(std::max<size_t>(n, 256)) {
    driver.check(driver.api().memAlloc(&ptr, bytes), "cuMemAlloc");
  }
  ~DeviceBuffer() { driver.api().memFree(ptr); }
};

/// Median milliseconds of `f` over `reps` runs after 3 warm-up runs, timed with events on stream 0.
template <typename F> double medianMs(const CudaDriver &d, int reps, F f) {
  for (int i = 0; i < 3; ++i)
    f();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i)
    times.push_back(1e3 * eventSeconds(d, f));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int64_t get(const Bundle::Entry &e, const char *name, int64_t fallback = 0) {
  auto it = e.statics.find(name);
  return it == e.statics.end() ? fallback : it->second;
}

/// The PTX emulator's calibrated estimate for `kernel` (loaded on the emulator) on `big`, as a fraction of
/// copy bandwidth: a sample of each launch's blocks runs, and the counts are scaled to the grid, except where
/// the kernels share a workspace (a fill skips the rows a scatter marked: every block runs).
double predictedFraction(const Kernel &kernel, const Case &big, bool sharesWorkspace) {
  const CudaDriver &emu = CudaDriver::emulator();
  ptxemu::LaunchOptions options = ptxemu::launchOptions();
  options.sampleBlocks = sharesWorkspace ? 0 : 256;
  options.registersFromPtxas = true; // where ptxas is installed: the latency bound's occupancy
  ptxemu::setLaunchOptions(options);
  DeviceCall call(emu, big);
  ptxemu::takeProfiles();
  kernel.launch(call.tensors, nullptr, big.attrs);
  double seconds = ptxemu::estimatedSeconds(ptxemu::takeProfiles());
  options.sampleBlocks = 0;
  options.registersFromPtxas = false;
  ptxemu::setLaunchOptions(options);
  return seconds > 0 ? (big.bytesMoved / ptxemu::GpuModel{}.bandwidth) / seconds : 0;
}

/// The key of an entry's cell in estimate.jsonl (moec-emu-estimate's lines): op, dtype, mode and shape.
std::string cellKey(const std::string &op, const std::string &dtype, const std::string &mode, int64_t H, int64_t E,
                    int64_t K) {
  return op + "|" + dtype + "|" + mode + "|" + std::to_string(H) + "|" + std::to_string(E) + "|" + std::to_string(K);
}

/// The calibrated estimates prepare.sh (ESTIMATE=1) stored beside the bundle, by cell; none without the file.
std::map<std::string, double> storedEstimates(const std::filesystem::path &bundle) {
  std::map<std::string, double> estimates;
  std::ifstream in(bundle / "estimate.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("estimate"))
      throw std::runtime_error((bundle / "estimate.jsonl").string() + ": a line without an estimate: " + line);
    estimates[cellKey(j.at("op"), j.at("dtype"), j.at("mode"), j.at("H"), j.at("E"), j.at("K"))] =
        j.at("estimate").get<double>();
  }
  return estimates;
}

} // namespace

namespace {

constexpr const char *kUsage = "usage: moec-gpu-check BUNDLE_DIR [REPS] [--predict]\n"
                               "  REPS 0: check only, no timing (default 20); --predict: also the PTX emulator's\n"
                               "  calibrated estimate per entry, +- its held-out mean error (without it, the\n"
                               "  estimates in BUNDLE_DIR/estimate.jsonl where prepare.sh stored them)\n"
                               "  MOEC_GPU=emu: everything on the emulator (checks at 1 and 37 tokens, no timing)\n";

int checkBundle(std::vector<std::string> args) {
  bool predict = std::erase(args, "--predict") > 0;
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (args.empty() || args.size() > 2) {
    std::cerr << kUsage;
    return 2;
  }
  int reps = 20;
  if (args.size() > 1) {
    char *end = nullptr;
    long value = std::strtol(args[1].c_str(), &end, 10);
    if (args[1].empty() || *end != '\0' || value < 0 || value > 100000) {
      std::cerr << "moec-gpu-check: REPS must be a whole number in [0, 100000], got '" << args[1] << "'\n";
      return 2;
    }
    reps = int(value);
  }
  if (!std::filesystem::is_directory(args[0])) {
    std::cerr << "moec-gpu-check: '" << args[0] << "' is not a directory (a bundle: moec bundle --out DIR)\n";
    return 1;
  }
  CudaDriver &driver = CudaDriver::instance();
  if (!driver.available()) {
    std::cerr << "moec-gpu-check: " << driver.unavailableReason() << "\n";
    return 1;
  }
  const bool emulated = &driver == &CudaDriver::emulator();
  std::unique_ptr<Bundle> bundle = Bundle::open(args[0], driver);
  std::unique_ptr<Bundle> predictor = predict ? Bundle::open(args[0], CudaDriver::emulator()) : nullptr;
  const std::map<std::string, double> stored = storedEstimates(args[0]);
  std::mt19937 rng(std::random_device{}());
  std::vector<std::string> table;
  int failures = 0;
  char line[512];
  for (size_t index = 0; index < bundle->entries().size(); ++index) {
    const Bundle::Entry &e = bundle->entries()[index];
    Kernel kernel = bundle->get(index);
    for (bool active : {false, true}) {
      if (active && (e.op != "moe_init_routing_v2_grad" || get(e, "drop_pad_mode")))
        continue;
      const std::string mode = modeName(e.statics, e.present, active);
      double worst = 0;
      // Token counts that stress the launch geometry: one token, and counts that are not multiples of the
      // rows per block or of the warp size (the emulator skips the largest: it runs every block).
      for (int64_t checkTokens : {int64_t(1), int64_t(37), int64_t(301)}) {
        if (emulated && checkTokens > 37)
          continue;
        Case small = caseFor(e.op, e.dtype, e.statics, e.present, checkTokens, active, rng, true);
        DeviceCall call(driver, small);
        kernel.launch(call.tensors, nullptr, small.attrs);
        driver.check(driver.api().ctxSynchronize(), "cuCtxSynchronize");
        for (const auto &[name, expected] : small.expected) {
          auto [err, allowed] = outputError(small, name, call.download(name));
          if (err < 0 || err > allowed) {
            ++failures;
            std::printf("FAIL %s %s %s T=%lld: %s off by %g (allowed %g)\n", e.op.c_str(), dsl::dtypeName(e.dtype),
                        mode.c_str(), (long long)checkTokens, name.c_str(), err, allowed);
          }
          worst = std::max(worst, err);
        }
      }
      if (reps == 0 && !predict) // check only (the memory checker's run)
        continue;
      int64_t tokens = productionTokens(get(e, "H"));
      Case big = caseFor(e.op, e.dtype, e.statics, e.present, tokens, active, rng, false);
      std::string measured = "        (emulated: not timed)                           ";
      if (!emulated && reps > 0) {
        DeviceCall bigCall(driver, big);
        double ms = medianMs(driver, reps, [&] { kernel.launch(bigCall.tensors, nullptr, big.attrs); });
        DeviceBuffer src(driver, size_t(big.bytesMoved / 2)), dst(driver, size_t(big.bytesMoved / 2));
        double copyMs = medianMs(driver, reps, [&] {
          driver.check(driver.api().memcpyDtoDAsync(dst.ptr, src.ptr, src.bytes, nullptr), "cuMemcpyDtoDAsync");
        });
        double tbs = big.bytesMoved / (ms * 1e-3) / 1e12, copyTbs = big.bytesMoved / (copyMs * 1e-3) / 1e12;
        std::snprintf(line, sizeof line, "%9.1f us %6.2f TB/s  copy %5.2f TB/s  %5.1f%%", ms * 1e3, tbs, copyTbs,
                      100 * tbs / copyTbs);
        measured = line;
      }
      std::string predicted = "      -";
      auto storedEstimate = stored.find(cellKey(e.op, dsl::dtypeName(e.dtype), mode, get(e, "H"), get(e, "E"),
                                                get(e, "K", get(e, "top_k"))));
      if (predictor || storedEstimate != stored.end()) {
        double fraction = predictor ? predictedFraction(predictor->get(index), big, !e.workspace.empty())
                                    : storedEstimate->second;
        std::snprintf(line, sizeof line, "%5.1f%% +-%.1f", 100 * fraction, ptxemu::estimateErrorBand(e.op).meanAbs);
        predicted = line;
      }
      std::snprintf(line, sizeof line, "%-42s %-5s %-44s H=%-5lld T=%-5lld %s  %s  err %.1e", e.op.c_str(),
                    dsl::dtypeName(e.dtype), mode.c_str(), (long long)get(e, "H"), (long long)tokens, measured.c_str(),
                    predicted.c_str(), worst);
      table.push_back(line);
    }
  }
  std::printf("\n%-42s %-5s %-44s %-7s %-7s %12s %11s  %15s  %6s  %9s\n", "op", "dtype", "mode", "H", "T", "median",
              "achieved", "baseline", "of copy", "predicted");
  for (const std::string &row : table)
    std::printf("%s\n", row.c_str());
  std::printf("%d check failures\n", failures);
  return failures == 0 ? 0 : 1;
}

} // namespace

// Every error becomes a message and exit status 1: a bad bundle, a driver failure, a failed launch.
int main(int argc, char **argv) {
  try {
    return checkBundle(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception &e) {
    std::cerr << "moec-gpu-check: error: " << e.what() << "\n";
    return 1;
  }
}
