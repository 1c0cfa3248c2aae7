//===- BenchCommand.cpp - moec bench ---------------------------------------===//
//
// Runs a built-in op on the inputs of bench/gpu/Cases.h (random, routed the way the forward op routes) at
// a production token count, and reports against the op's minimum traffic:
//   --target cpu      the median time of the kernels next to a memcpy of the same bytes, in the same run;
//   --target ptx-emu  the PTX emulator's profile of each kernel (instructions by class, requests, sectors,
//                     coalescing) and the H200 bound it implies, as a fraction of copy bandwidth. Large grids
//                     run a sample of blocks (--sample-blocks) and scale the counts; the report says so.
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "Common.h"

#include "Cases.h"

#include "moec/Runtime.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/ptxemu/EmuDriver.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace moec::cli {

namespace {

struct BenchOptions {
  std::string op;
  TargetOptions target;
  std::vector<std::string> dims, attrs, with;
  int64_t tokens = 0;
  bool active = false;
  int reps = 20;
  uint64_t sampleBlocks = 256;
};

template <typename F> double medianSeconds(int reps, F f) {
  f(); // warm-up
  std::vector<double> times;
  for (int i = 0; i < std::max(reps, 1); ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void benchEmulated(const BenchOptions &o, const Kernel &kernel, const gpucheck::Case &c) {
  ptxemu::LaunchOptions launch = ptxemu::launchOptions();
  launch.sampleBlocks = o.sampleBlocks;
  ptxemu::setLaunchOptions(launch);
  gpucheck::DeviceCall call(CudaDriver::emulator(), c);
  ptxemu::takeProfiles();
  kernel.launch(call.tensors, nullptr, c.attrs);
  std::vector<ptxemu::Profile> profiles = ptxemu::takeProfiles();
  ptxemu::Profile total;
  for (const ptxemu::Profile &p : profiles) {
    fmt::print("{}", ptxemu::formatProfile(p));
    total.add(p);
  }
  double boundSeconds = ptxemu::boundSeconds(profiles);
  fmt::print("total: {:.1f} MB minimum traffic; {:.2f} warp instructions per 16 bytes; coalescing {:.1f}%; "
             "H200 bound {:.2f} us = {:.1f}% of copy bandwidth{}\n",
             c.bytesMoved / 1e6, 16 * total.totalWarpInstructions() / std::max(c.bytesMoved, 1.0),
             100 * total.coalescing(), 1e6 * boundSeconds,
             100 * (c.bytesMoved / ptxemu::GpuModel{}.bandwidth) / boundSeconds, total.sampled() ? " (sampled)" : "");
}

void benchCpu(const BenchOptions &o, const Kernel &kernel, gpucheck::Case &c) {
  std::map<std::string, TensorView> views;
  std::map<std::string, HostTensor> outputs;
  for (auto &[name, t] : c.inputs)
    views[name] = t.view();
  for (auto &[name, t] : c.expected)
    views[name] = outputs.emplace(name, HostTensor(t.type(), t.dims())).first->second.view();
  double kernelSeconds = medianSeconds(o.reps, [&] { kernel.launch(views, nullptr, c.attrs); });
  // The baseline copies half the minimum traffic: a copy reads and writes each byte once.
  std::vector<uint8_t> src(size_t(c.bytesMoved / 2), 1), dst(src.size());
  double copySeconds = medianSeconds(o.reps, [&] { std::memcpy(dst.data(), src.data(), src.size()); });
  fmt::print("median {:.1f} us, {:.2f} GB/s; memcpy of the same bytes {:.1f} us, {:.2f} GB/s; {:.2f}x memcpy\n",
             1e6 * kernelSeconds, c.bytesMoved / kernelSeconds / 1e9, 1e6 * copySeconds,
             c.bytesMoved / copySeconds / 1e9, copySeconds / kernelSeconds);
}

void runBench(const BenchOptions &o) {
  if (o.target.target == "ptx")
    throw CLI::ValidationError("--target", "moec bench runs on cpu or ptx-emu; on a GPU, use bench/gpu/run.sh");
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

  Runtime::Options options;
  options.target = o.target.resolveTarget();
  if (o.target.emulated())
    options.driver = &CudaDriver::emulator();
  Kernel kernel = Runtime(options).get(o.op, request);
  std::mt19937 rng(12345);
  gpucheck::Case c = gpucheck::caseFor(o.op, request.dtype, statics, request.with, tokens, o.active, rng, false);
  fmt::print("{} {} {} T={} on {}\n", o.op, o.target.dtype, gpucheck::modeName(statics, request.with, o.active),
             tokens, o.target.target);
  if (o.target.emulated())
    benchEmulated(o, kernel, c);
  else
    benchCpu(o, kernel, c);
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
  cmd->add_option("--reps", o->reps, "cpu: timed repetitions (the median is reported)")->capture_default_str();
  cmd->add_option("--sample-blocks", o->sampleBlocks, "ptx-emu: blocks to run, spread over the grid (0: all)")
      ->capture_default_str();
  cmd->callback([o] { runBench(*o); });
}

} // namespace moec::cli
