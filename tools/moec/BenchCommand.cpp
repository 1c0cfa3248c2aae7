//===- BenchCommand.cpp - moec bench ---------------------------------------===//
//
// Runs a built-in op on the inputs of moec/cases/Cases.h (random, routed the way the forward op routes) at
// a production token count, and reports against the op's minimum traffic:
//   --target cpu      the median and minimum time of the kernels, repeated until a time budget is spent,
//                     alternating with a memcpy of the same bytes on the same threads (--threads) and with
//                     a pass that only reads the bytes the op reads (the bound on the ratio to the memcpy);
//   --target ptx-emu  the PTX emulator's profile of each kernel (instructions by class, requests, sectors,
//                     coalescing) and the H200 bound it implies, as a fraction of copy bandwidth; then the
//                     estimate calibrated on a GPU run, with the error band of the cells it held out. Large
//                     grids run a sample of blocks (--sample-blocks) and scale the counts; the report says so.
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "Common.h"

#include "moec/cases/Cases.h"
#include "moec/cases/CpuBaseline.h"

#include "moec/jit/Runtime.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/ThreadPool.h"
#include "moec/runtime/ptxemu/EmuDriver.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace moec::cli {

namespace {

struct BenchOptions {
  std::string op;
  TargetOptions target;
  std::vector<std::string> dims, attrs, with;
  int64_t tokens = 0;
  int64_t topK = 0;    // A3's routing top-K (0: the inputs' default)
  int64_t experts = 0; // B2's routing expert count (0: the inputs' default)
  bool active = false;
  int reps = 5;
  double budget = 1.0;
  bool json = false;
  uint64_t sampleBlocks = 256;
};

struct Timing {
  double median = 0, min = 0;
  int reps = 0;
};

Timing summarize(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front(), int(times.size())};
}

/// Like Triton's do_bench, for a kernel and its baselines side by side: one warm-up call of each, then
/// alternating calls until `budget` seconds are spent on the kernel (at least `reps` each). Alternating
/// keeps all under the same conditions on a shared, noisy machine. Returns the kernel's timing, then each
/// baseline's.
std::vector<Timing> timeSideBySide(int reps, double budget, const std::vector<std::function<void()>> &calls) {
  for (const auto &call : calls)
    call();
  std::vector<std::vector<double>> times(calls.size());
  double spent = 0;
  while (int(times[0].size()) < std::max(reps, 1) || spent < budget) {
    for (size_t i = 0; i < calls.size(); ++i)
      times[i].push_back(gpucheck::secondsOf(calls[i]));
    spent += times[0].back();
  }
  std::vector<Timing> timings;
  for (std::vector<double> &t : times)
    timings.push_back(summarize(std::move(t)));
  return timings;
}

nlohmann::json header(const BenchOptions &o, const std::string &mode, int64_t tokens, double bytes) {
  return {{"op", o.op}, {"dtype", o.target.dtype}, {"mode", mode}, {"tokens", tokens}, {"target", o.target.target},
          {"bytes", bytes}};
}

void benchEmulated(const BenchOptions &o, const Kernel &kernel, const gpucheck::Case &c, nlohmann::json line) {
  ptxemu::LaunchOptions launch = ptxemu::launchOptions();
  launch.sampleBlocks = o.sampleBlocks;
  launch.registersFromPtxas = true; // the latency bound's occupancy
  // Kernels that pass rows through the workspace (a fill skips the rows a scatter marked) see each
  // other's effects: a sample of one kernel's blocks would leave the next one's work wrong. All run.
  if (!kernel.specialization().workspace.empty() && o.sampleBlocks != 0) {
    launch.sampleBlocks = 0;
    if (!o.json)
      fmt::print("(the kernels share a workspace: every block runs, --sample-blocks does not apply)\n");
  }
  ptxemu::setLaunchOptions(launch);
  gpucheck::DeviceCall call(CudaDriver::emulator(), c);
  ptxemu::takeProfiles();
  kernel.launch(call.tensors, nullptr, c.attrs);
  std::vector<ptxemu::Profile> profiles = ptxemu::takeProfiles();
  ptxemu::Profile total;
  for (const ptxemu::Profile &p : profiles) {
    if (!o.json)
      fmt::print("{}", ptxemu::formatProfile(p));
    total.add(p);
  }
  double boundSeconds = ptxemu::boundSeconds(profiles);
  double perChunk = 16 * total.totalWarpInstructions() / std::max(c.bytesMoved, 1.0);
  double ofCopy = (c.bytesMoved / ptxemu::GpuModel{}.bandwidth) / boundSeconds;
  double estimate = (c.bytesMoved / ptxemu::GpuModel{}.bandwidth) / ptxemu::estimatedSeconds(profiles);
  ptxemu::ErrorBand band = ptxemu::estimateErrorBand(o.op);
  if (o.json) {
    nlohmann::json launches = nlohmann::json::array();
    for (const ptxemu::Profile &p : profiles) {
      ptxemu::Bound b = ptxemu::bound(p);
      launches.push_back({{"kernel", p.kernel},
                          {"memory_us", 1e6 * b.memory},
                          {"issue_us", 1e6 * b.issue},
                          {"latency_us", 1e6 * b.latency},
                          {"warps_per_sm", ptxemu::residentWarpsPerSm(p)},
                          {"registers", p.registers}});
    }
    line["launches"] = launches;
    line.update({{"warp_instructions_per_16B", perChunk}, {"coalescing", total.coalescing()},
                 {"bound_us", 1e6 * boundSeconds}, {"fraction_of_copy", ofCopy}, {"sampled", total.sampled()},
                 {"estimate_fraction_of_copy", estimate},
                 {"estimate_band", {{"points_mean_abs", band.meanAbs}, {"points_worst", band.worst},
                                    {"cells", band.cells}, {"cells_of", band.op}, {"source", band.source}}}});
    fmt::print("{}\n", line.dump());
    return;
  }
  fmt::print("total: {:.1f} MB minimum traffic; {:.2f} warp instructions per 16 bytes; coalescing {:.1f}%; "
             "H200 bound {:.2f} us = {:.1f}% of copy bandwidth{}\n",
             c.bytesMoved / 1e6, perChunk, 100 * total.coalescing(), 1e6 * boundSeconds, 100 * ofCopy,
             total.sampled() ? " (sampled)" : "");
  fmt::print("estimate: {:.1f}% of copy, +-{:.1f} points (worst {:.1f}): the calibration's error on {} held-out cells "
             "of {} ({}; bench/emu/calibrate.py)\n",
             100 * estimate, band.meanAbs, band.worst, band.cells, band.op == "all" ? "every op" : band.op, band.source);
}

void benchCpu(const BenchOptions &o, const Kernel &kernel, gpucheck::Case &c, nlohmann::json line) {
  gpucheck::CaseTensors tensors(c);
  gpucheck::MemcpyBaseline memcpyBaseline(c);
  gpucheck::ReadBaseline readBaseline(c);
  ThreadPool &pool = ThreadPool::shared();
  std::vector<Timing> timings = timeSideBySide(
      o.reps, o.budget,
      {[&] { kernel.launch(tensors.views, nullptr, c.attrs); }, [&] { memcpyBaseline(); }, [&] { readBaseline(); }});
  const Timing &kernelTime = timings[0], &copyTime = timings[1], &readTime = timings[2];
  double ratio = copyTime.median / kernelTime.median, readBound = copyTime.median / std::max(readTime.median, 1e-9);
  if (o.json) {
    line.update({{"threads", pool.size()},
                 {"reps", kernelTime.reps},
                 {"median_us", 1e6 * kernelTime.median},
                 {"min_us", 1e6 * kernelTime.min},
                 {"memcpy_median_us", 1e6 * copyTime.median},
                 {"vs_memcpy", ratio},
                 {"reads_median_us", 1e6 * readTime.median},
                 {"read_bound_vs_memcpy", readBound}});
    fmt::print("{}\n", line.dump());
    return;
  }
  fmt::print("{} threads, {} runs: median {:.1f} us, min {:.1f} us, {:.2f} GB/s; memcpy of the same bytes "
             "{:.1f} us, {:.2f} GB/s; {:.2f}x memcpy\n",
             pool.size(), kernelTime.reps, 1e6 * kernelTime.median, 1e6 * kernelTime.min,
             c.bytesMoved / kernelTime.median / 1e9, 1e6 * copyTime.median, c.bytesMoved / copyTime.median / 1e9,
             ratio);
  fmt::print("reading the {:.1f} MB it reads, alone: {:.1f} us, {:.2f} GB/s; the most a kernel can reach is "
             "{:.2f}x memcpy\n",
             (c.bytesMoved - c.bytesWritten) / 1e6, 1e6 * readTime.median,
             (c.bytesMoved - c.bytesWritten) / readTime.median / 1e9, readBound);
}

void runBench(BenchOptions o) {
  if (o.target.target == "ptx")
    throw CLI::ValidationError("--target", "moec bench runs on cpu or ptx-emu; on a GPU, use bench/gpu/run.sh");
  if (o.target.target == "cpu" && o.target.schedule.threads) {
    // On the CPU --threads is the worker count (a CPU schedule has no threads per row). The shared pool
    // reads it when first used, which is below; it takes 1 to 1024.
    if (o.target.schedule.threads < 1 || o.target.schedule.threads > 1024)
      throw CLI::ValidationError("--threads", "on the cpu, the worker count must be in [1, 1024]; got " +
                                                  std::to_string(o.target.schedule.threads));
    setenv("MOEC_THREADS", std::to_string(o.target.schedule.threads).c_str(), 1);
    o.target.schedule.threads = 0;
  }
  std::unique_ptr<dsl::OpDef> op = loadOp(o.op);
  KernelRequest request;
  request.dtype = parseDType(o.target.dtype);
  request.dims = parseAssignments(o.dims, "--dim");
  request.attrs = parseAssignments(o.attrs, "--attr");
  request.with = presentTensors(*op, o.with);
  request.schedule = o.target.schedule;
  std::map<std::string, int64_t> statics = request.dims;
  statics.insert(request.attrs.begin(), request.attrs.end());
  int64_t tokens = o.tokens ? o.tokens : gpucheck::productionTokens(statics.count("H") ? statics.at("H") : 0);
  if (o.topK) {
    if (o.op != "moe_token_unpermute_with_routing_map_grad")
      throw CLI::ValidationError("--topk", "only for moe_token_unpermute_with_routing_map_grad (" + o.op +
                                               " takes its top-K as a dim or attribute)");
    statics[gpucheck::kRoutingTopK] = o.topK;
  }
  if (o.experts) {
    if (o.op != "moe_init_routing_v2_grad")
      throw CLI::ValidationError("--experts", "only for moe_init_routing_v2_grad (" + o.op + " takes E as a dim)");
    statics[gpucheck::kRoutingExperts] = o.experts;
  }

  Runtime::Options options;
  options.target = o.target.resolveTarget();
  if (o.target.emulated())
    options.driver = &CudaDriver::emulator();
  Kernel kernel = Runtime(options).get(o.op, request);
  std::mt19937 rng(12345);
  gpucheck::Case c = gpucheck::caseFor(o.op, request.dtype, statics, request.with, tokens, o.active, rng, false);
  std::string mode = gpucheck::modeName(statics, request.with, o.active);
  if (!o.json)
    fmt::print("{} {} {} T={} on {}\n", o.op, o.target.dtype, mode, tokens, o.target.target);
  nlohmann::json line = header(o, mode, tokens, c.bytesMoved);
  if (o.target.emulated())
    benchEmulated(o, kernel, c, line);
  else
    benchCpu(o, kernel, c, line);
}

} // namespace

void registerBenchCommand(CLI::App &app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App *cmd = app.add_subcommand(
      "bench", "Measure a built-in op at a production shape: cpu time vs memcpy, or the ptx-emu profile and H200 bound");
  cmd->add_option("op", o->op, "built-in op name")->required();
  o->target.add(*cmd);
  cmd->add_option("--dim", o->dims, "NAME=VALUE for a static dim (repeatable)");
  cmd->add_option("--attr", o->attrs, "NAME=VALUE for an attribute (repeatable)");
  cmd->add_option("--with", o->with, "an optional input the call passes (repeatable)");
  cmd->add_option("--tokens", o->tokens, "token count (0: spec §8.1's production count for H)");
  cmd->add_flag("--active", o->active, "moe_init_routing_v2_grad: the active_num variant");
  cmd->add_option("--topk", o->topK,
                  "moe_token_unpermute_with_routing_map_grad: experts per token in the inputs' routing (default 8, E "
                  "when fewer; drop_and_pad: capacity tokens x K / E)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--experts", o->experts,
                  "moe_init_routing_v2_grad: experts in the inputs' routing (default max(8, top_k)); each expert's rows "
                  "are contiguous in grad_expanded_x, as B1 lays them out")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--reps", o->reps, "cpu: at least this many timed runs (median and minimum reported)")
      ->capture_default_str();
  cmd->add_option("--budget", o->budget, "cpu: seconds of timed kernel runs (each followed by a memcpy run)")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON line instead of text");
  cmd->add_option("--sample-blocks", o->sampleBlocks, "ptx-emu: blocks to run, spread over the grid (0: all)")
      ->capture_default_str();
  cmd->callback([o] { runBench(*o); });
}

} // namespace moec::cli
