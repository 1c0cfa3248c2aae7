//===- RunCommand.cpp - moec run ------------------------------------------------===//
#include "Commands.h"
#include "Common.h"

#include "moec/contracts/NearestName.h"
#include "moec/jit/CpuRun.h"
#include "moec/jit/Runtime.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/DeviceTensors.h"
#include "moec/runtime/HostTensor.h"
#include "moec/runtime/ptxemu/EmuDriver.h"

#include <fmt/core.h>

#include <filesystem>

namespace moec::cli {

namespace {

struct RunOptions {
  std::string op;
  TargetOptions target;
  std::vector<std::string> attrs;
  std::vector<std::string> dims; // optional: each is checked against the dim the inputs' shapes give
  std::vector<std::string> inputs;
  std::string outDir;
  bool profile = false;
};

void writeOutputs(const std::map<std::string, HostTensor> &outputs, const std::string &outDir) {
  std::filesystem::create_directories(outDir);
  for (const auto &[name, tensor] : outputs) {
    std::string path = (std::filesystem::path(outDir) / (name + ".npy")).string();
    writeNpy(path, tensor.toNpy());
    fmt::print("{}: {} {} -> {}\n", name, dsl::dtypeName(tensor.type()), TensorView{nullptr, tensor.type(), tensor.dims()}.shapeString(), path);
  }
}

/// The inputs' shapes give every dim; a --dim (natural after `moec emit`) must say the same.
void checkDims(const dsl::OpDef &op, const std::vector<std::string> &given, const BoundCall &call) {
  for (const auto &[name, value] : parseAssignments(given, "--dim")) {
    if (!op.findDim(name))
      throw CLI::ValidationError("--dim", "'" + name + "' is not a dim of " + op.name +
                                              didYouMean(name, op.dimNames(false)));
    auto bound = call.dims.find(name);
    if (bound == call.dims.end())
      throw CLI::ValidationError("--dim", "no input given carries dim '" + name + "'");
    if (bound->second != value)
      throw CLI::ValidationError("--dim", name + "=" + std::to_string(value) + ", but the inputs' shapes give " +
                                              name + "=" + std::to_string(bound->second));
  }
}

void runRun(const RunOptions &o) {
  if (o.profile && !o.target.emulated())
    throw CLI::ValidationError("--profile", "the profile comes from the PTX emulator: use --target ptx-emu");
  std::unique_ptr<dsl::OpDef> op = loadOp(o.op);
  DType dtype = parseDType(o.target.dtype);
  bool ascend = o.target.target == "ascend";

  std::map<std::string, HostTensor> owned;
  std::map<std::string, TensorView> views;
  for (const std::string &item : o.inputs) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw CLI::ValidationError("--in", "expected NAME=FILE.npy, got '" + item + "'");
    std::string name = item.substr(0, eq);
    const dsl::TensorDecl *t = op->findTensor(name);
    if (!t || t->isOutput)
      throw std::runtime_error(op->name + ": '" + name + "' is not an input tensor of the op");
    if (owned.count(name))
      throw CLI::ValidationError("--in", "tensor '" + name + "' is given twice");
    NpyArray array = readNpy(item.substr(eq + 1));
    auto [it, _] = owned.emplace(name, HostTensor::fromNpy(array, t->elem.resolve(dtype), name));
    views[name] = it->second.view();
  }

  for (const dsl::TensorDecl &t : op->tensors)
    if (!t.isOutput && !t.optional && !views.count(t.name))
      throw CLI::ValidationError("--in", "input tensor '" + t.name + "' of " + op->name + " is missing (--in " + t.name +
                                             "=FILE.npy)");
  std::map<std::string, int64_t> attrs = parseAssignments(o.attrs, "--attr");
  if (ascend) { // the tiled kernels on the UB simulator (which binds the call itself), and what each launch did
    if (!o.dims.empty())
      checkDims(*op, o.dims, bindCall(*op, dtype, attrs, views));
    ascend::Chip chip = o.target.chip.load();
    CpuRunResult result = runOnAscendSimulator(*op, dtype, attrs, views, chip, o.target.schedule);
    writeOutputs(result.outputs, o.outDir);
    fmt::print("{}", ascend::reportTable(result.simulated, chip, result.tilings));
    return;
  }
  // The static dims come from the shapes; the kernel comes from the runtime's caches when it can.
  BoundCall call = bindCall(*op, dtype, attrs, views);
  checkDims(*op, o.dims, call);
  KernelRequest request{dtype, {}, attrs, {}, o.target.schedule};
  for (const dsl::DimDecl &d : op->dims)
    if (d.isStatic && call.dims.count(d.name))
      request.dims[d.name] = call.dims.at(d.name);
  for (const std::string &name : call.present)
    if (!op->findTensor(name)->isOutput)
      request.with.insert(name);
  Runtime::Options options;
  options.target = o.target.resolveTarget();
  if (o.target.emulated())
    options.driver = &CudaDriver::emulator();
  Runtime runtime(options);
  Kernel kernel = runtime.get(o.op, request);

  std::map<std::string, HostTensor> outputs;
  for (const auto &[name, shape] : call.outputShapes)
    outputs.emplace(name, HostTensor(op->findTensor(name)->elem.resolve(dtype), shape));
  if (options.target->kind == TargetKind::CPU) {
    for (auto &[name, tensor] : outputs)
      views[name] = tensor.view();
    kernel.launch(views);
  } else { // through the driver: the GPU's, or the emulator's for ptx-emu
    const CudaDriver &driver = o.target.emulated() ? CudaDriver::emulator() : CudaDriver::instance();
    DeviceTensors device(driver);
    std::map<std::string, TensorView> onDevice;
    for (auto &[name, tensor] : owned)
      onDevice[name] = device.upload(tensor);
    for (auto &[name, tensor] : outputs)
      onDevice[name] = device.allocate(tensor.type(), tensor.dims());
    if (o.target.emulated())
      ptxemu::takeProfiles();
    kernel.launch(onDevice);
    driver.check(driver.api().ctxSynchronize(), "cuCtxSynchronize");
    for (auto &[name, tensor] : outputs)
      device.download(tensor, onDevice.at(name));
    if (o.profile)
      for (const ptxemu::Profile &p : ptxemu::takeProfiles())
        fmt::print("{}", ptxemu::formatProfile(p));
  }
  writeOutputs(outputs, o.outDir);
}

} // namespace

void registerRunCommand(CLI::App &app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App *cmd = app.add_subcommand("run", "Run an op on .npy inputs: on the CPU, a GPU, the PTX emulator (--target "
                                            "ptx-emu), or as tiled Ascend kernels on the UB simulator (--target ascend)");
  cmd->add_option("op", o->op, "built-in op name or path to a .moe file")->required();
  o->target.add(*cmd, /*ascend=*/true);
  cmd->add_option("--attr", o->attrs, "NAME=VALUE for an attribute (repeatable)");
  cmd->add_option("--in", o->inputs, "NAME=FILE.npy for each input tensor (repeatable)")->required();
  cmd->add_option("--dim", o->dims,
                  "NAME=VALUE: the inputs' shapes give every dim; one given here is checked against them (repeatable)");
  cmd->add_option("--out-dir", o->outDir, "where each output is written as <name>.npy")->required();
  cmd->add_flag("--profile", o->profile, "ptx-emu: print each launch's instruction and memory profile");
  cmd->callback([o] { runRun(*o); });
}

} // namespace moec::cli
