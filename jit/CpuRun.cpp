//===- CpuRun.cpp - Compile and run an op on host tensors -----------------===//
#include "moec/jit/CpuRun.h"

#include "moec/jit/Runtime.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/DeviceTensors.h"

#include <cstring>
#include <sstream>

namespace moec {

std::shared_ptr<const CompiledRuns::Entry> CompiledRuns::get(const std::string &key,
                                                             const std::function<Entry()> &make) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = entries.find(key);
  if (it == entries.end())
    it = entries.emplace(key, std::make_shared<const Entry>(make())).first;
  return it->second;
}

size_t CompiledRuns::size() {
  std::lock_guard<std::mutex> lock(mutex);
  return entries.size();
}

namespace {

/// What a compiled run depends on: the op object, every field of the specialization, and the driver whose
/// context holds the loaded module.
std::string runKey(const dsl::OpDef &op, const ResolvedSpecialization &spec, const CudaDriver *driver) {
  std::ostringstream key;
  key << static_cast<const void *>(&op) << '|' << dsl::dtypeName(spec.dtype) << '|' << spec.target.str() << '|'
      << spec.schedule.str() << '|' << static_cast<const void *>(driver) << "|statics";
  for (const auto &[name, value] : spec.statics)
    key << ' ' << name << '=' << value;
  key << "|present";
  for (const std::string &tensor : spec.inputs)
    key << ' ' << tensor;
  return key.str();
}

/// `make`'s entry, from `reuse` when it has one for the same op and specialization.
std::shared_ptr<const CompiledRuns::Entry> compiledRun(CompiledRuns *reuse, const dsl::OpDef &op,
                                                       const ResolvedSpecialization &spec, const CudaDriver *driver,
                                                       const std::function<CompiledRuns::Entry()> &make) {
  if (!reuse)
    return std::make_shared<const CompiledRuns::Entry>(make());
  return reuse->get(runKey(op, spec, driver), make);
}

/// Launches `loaded` on host tensors: the outputs are allocated with every byte 0xFF (NaN in every float
/// type), so that an element the kernels never write shows.
void launchOnHost(const dsl::OpDef &op, DType dtype, const BoundCall &call, std::shared_ptr<const LoadedOp> loaded,
                  const std::map<std::string, int64_t> &attrs, const std::map<std::string, TensorView> &inputs,
                  CpuRunResult &result) {
  Kernel kernel(std::move(loaded), attrs);
  std::map<std::string, TensorView> tensors = inputs;
  for (const auto &[name, shape] : call.outputShapes) {
    auto [it, _] = result.outputs.emplace(name, HostTensor(op.findTensor(name)->elem.resolve(dtype), shape));
    std::memset(it->second.raw(), 0xFF, it->second.bytes());
    tensors[name] = it->second.view();
  }
  kernel.launch(tensors);
}

/// The caller owns `op` for the whole call (or, with a CompiledRuns, as long as it): kernels only borrow it.
std::shared_ptr<const dsl::OpDef> borrow(const dsl::OpDef &op) {
  return std::shared_ptr<const dsl::OpDef>(&op, [](const dsl::OpDef *) {});
}

} // namespace

CpuRunResult runOnCpu(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                      const std::map<std::string, TensorView> &inputs, const Schedule &schedule,
                      CompiledRuns *reuse) {
  BoundCall call = bindCall(op, dtype, attrs, inputs);
  ResolvedSpecialization spec = resolve(op, {dtype, call.statics(op), Target::cpu(), schedule, call.present});
  auto entry = compiledRun(reuse, op, spec, nullptr, [&] {
    CompiledOp compiled = compile(op, spec);
    return CompiledRuns::Entry{makeLoadedOp(borrow(op), spec, kernelMetas(compiled), compiled.workspace, "",
                                            std::move(compiled.cpu), nullptr),
                               compiled.times, nullptr};
  });
  CpuRunResult result;
  result.compileTimes = entry->times;
  launchOnHost(op, dtype, call, entry->loaded, attrs, inputs, result);
  return result;
}

CpuRunResult runOnAscendSimulator(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                                  const std::map<std::string, TensorView> &inputs, const ascend::Chip &chip,
                                  const Schedule &schedule) {
  BoundCall call = bindCall(op, dtype, attrs, inputs);
  ResolvedSpecialization spec = resolve(op, {dtype, call.statics(op), Target::ascendSimulator(chip), schedule, call.present});
  CompiledOp compiled = compile(op, spec);
  CpuRunResult result;
  result.compileTimes = compiled.times;
  result.tilings = compiled.ascend;
  std::shared_ptr<LoadedOp> loaded =
      makeLoadedOp(borrow(op), spec, kernelMetas(compiled), compiled.workspace, "", std::move(compiled.cpu), nullptr);
  std::vector<std::string> names;
  for (const KernelMeta &k : loaded->kernels)
    names.push_back(k.name);
  auto log = std::make_shared<ascend::SimulationLog>();
  loaded->cpuLauncher = ascend::simulatorLauncher(chip, std::move(names), log); // and keep what each did
  launchOnHost(op, dtype, call, loaded, attrs, inputs, result);
  result.simulated = log->launches();
  return result;
}

CpuRunResult runOnDevice(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                         const std::map<std::string, TensorView> &inputs, const Schedule &schedule,
                         const Target &target, const CudaDriver &driver, CompiledRuns *reuse) {
  BoundCall call = bindCall(op, dtype, attrs, inputs);
  ResolvedSpecialization spec = resolve(op, {dtype, call.statics(op), target, schedule, call.present});
  auto entry = compiledRun(reuse, op, spec, &driver, [&] {
    CompiledOp compiled = compile(op, spec);
    auto context = std::make_shared<const CudaContext>(driver, kCudaDevice);
    return CompiledRuns::Entry{makeLoadedOp(borrow(op), spec, kernelMetas(compiled), compiled.workspace,
                                            compiled.ptx, nullptr, &driver, context),
                               compiled.times, context};
  });
  CpuRunResult result;
  result.compileTimes = entry->times;
  Kernel kernel(entry->loaded, attrs);

  DeviceTensors device(driver);
  std::map<std::string, TensorView> tensors;
  for (const auto &[name, view] : inputs)
    // An absent optional input stays empty; a non-contiguous one goes as it is, for launch() to refuse.
    tensors[name] = view.data && view.isContiguous() ? device.upload(view) : view;
  for (const auto &[name, shape] : call.outputShapes) {
    auto [it, _] = result.outputs.emplace(name, HostTensor(op.findTensor(name)->elem.resolve(dtype), shape));
    tensors[name] = device.allocate(it->second.type(), shape, 0xFF); // as in runOnCpu
  }
  {
    CudaContext::Scope current(driver, entry->context.get());
    kernel.launch(tensors);
    driver.check(driver.api().ctxSynchronize(), "cuCtxSynchronize");
  }
  for (auto &[name, out] : result.outputs)
    device.download(out, tensors.at(name));
  return result;
}

} // namespace moec
