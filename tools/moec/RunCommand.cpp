//===- RunCommand.cpp - moec run ------------------------------------------------===//
#include "Commands.h"
#include "Common.h"

#include "moec/ops/BuiltinOps.h"
#include "moec/Runtime.h"
#include "moec/runtime/HostTensor.h"

#include <fmt/core.h>

#include <filesystem>

namespace moec::cli {

namespace {

struct RunOptions {
  std::string op;
  TargetOptions target;
  std::vector<std::string> attrs;
  std::vector<std::string> inputs;
  std::string outDir;
};

void runRun(const RunOptions &o) {
  if (o.target.target != "cpu")
    throw CLI::ValidationError("--target", "moec run executes on the cpu target only (GPU launches need a device)");
  std::unique_ptr<dsl::OpDef> op = loadOp(o.op);
  DType dtype = parseDType(o.target.dtype);

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

  // The static dims come from the shapes; the kernel comes from the runtime's caches when it can.
  std::map<std::string, int64_t> attrs = parseAssignments(o.attrs, "--attr");
  BoundCall call = bindCall(*op, dtype, attrs, views);
  KernelRequest request{dtype, {}, attrs, {}, o.target.schedule};
  for (const dsl::DimDecl &d : op->dims)
    if (d.isStatic && call.dims.count(d.name))
      request.dims[d.name] = call.dims.at(d.name);
  for (const std::string &name : call.present)
    if (!op->findTensor(name)->isOutput)
      request.with.insert(name);
  Runtime::Options options;
  options.target = Target::cpu();
  Kernel kernel = Runtime(options).get(o.op, request);

  std::map<std::string, HostTensor> outputs;
  for (const auto &[name, shape] : call.outputShapes) {
    auto [it, _] = outputs.emplace(name, HostTensor(op->findTensor(name)->elem.resolve(dtype), shape));
    views[name] = it->second.view();
  }
  kernel.launch(views);
  std::filesystem::create_directories(o.outDir);
  for (const auto &[name, tensor] : outputs) {
    std::string path = (std::filesystem::path(o.outDir) / (name + ".npy")).string();
    writeNpy(path, tensor.toNpy());
    fmt::print("{}: {} {} -> {}\n", name, dsl::dtypeName(tensor.type()), TensorView{nullptr, tensor.type(), tensor.dims()}.shapeString(), path);
  }
}

} // namespace

void registerRunCommand(CLI::App &app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App *cmd = app.add_subcommand("run", "Run an op on the CPU on .npy inputs (compiled, or from the cache)");
  cmd->add_option("op", o->op, "built-in op name or path to a .moe file")->required();
  o->target.add(*cmd);
  cmd->add_option("--attr", o->attrs, "NAME=VALUE for an attribute (repeatable)");
  cmd->add_option("--in", o->inputs, "NAME=FILE.npy for each input tensor (repeatable)")->required();
  cmd->add_option("--out-dir", o->outDir, "where each output is written as <name>.npy")->required();
  cmd->callback([o] { runRun(*o); });
}

} // namespace moec::cli
