//===- CpuRun.cpp - Compile and run an op on host tensors -----------------===//
#include "moec/jit/CpuRun.h"

#include "moec/jit/Runtime.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/DeviceTensors.h"

#include <cstring>

namespace moec {

namespace {

/// Compiles for a host-run target (the CPU, or the Ascend simulator) and launches on host tensors;
/// `prepare` (if set) sees the loaded specialization first (to replace its launcher).
CpuRunResult runOnHost(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                       const std::map<std::string, TensorView> &inputs, const Schedule &schedule, const Target &target,
                       const std::function<void(LoadedOp &, const CompiledOp &, CpuRunResult &)> &prepare) {
  BoundCall call = bindCall(op, dtype, attrs, inputs);
  Specialization spec{dtype, call.statics(op), target, schedule, call.present};
  CompiledOp compiled = compile(op, spec);

  CpuRunResult result;
  result.compileTimes = compiled.times;
  // The caller owns `op` for the whole call; the kernel only borrows it.
  std::shared_ptr<const dsl::OpDef> borrowed(&op, [](const dsl::OpDef *) {});
  std::shared_ptr<LoadedOp> loaded =
      makeLoadedOp(borrowed, spec, kernelMetas(compiled), compiled.workspace, "", std::move(compiled.cpu), nullptr);
  if (prepare)
    prepare(*loaded, compiled, result);
  Kernel kernel(loaded, attrs);
  std::map<std::string, TensorView> tensors = inputs;
  for (const auto &[name, shape] : call.outputShapes) {
    auto [it, _] = result.outputs.emplace(name, HostTensor(op.findTensor(name)->elem.resolve(dtype), shape));
    // All bytes 0xFF (NaN in every float type): an element the kernels never write shows.
    std::memset(it->second.raw(), 0xFF, it->second.bytes());
    tensors[name] = it->second.view();
  }
  kernel.launch(tensors);
  return result;
}

} // namespace

CpuRunResult runOnCpu(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                      const std::map<std::string, TensorView> &inputs, const Schedule &schedule) {
  return runOnHost(op, dtype, attrs, inputs, schedule, Target::cpu(), nullptr);
}

CpuRunResult runOnAscendSimulator(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                                  const std::map<std::string, TensorView> &inputs, const ascend::Chip &chip,
                                  const Schedule &schedule) {
  auto log = std::make_shared<ascend::SimulationLog>();
  CpuRunResult result = runOnHost(
      op, dtype, attrs, inputs, schedule, Target::ascendSimulator(chip),
      [&](LoadedOp &loaded, const CompiledOp &compiled, CpuRunResult &out) {
        out.tilings = compiled.ascend;
        std::vector<std::string> names;
        for (const KernelMeta &k : loaded.kernels)
          names.push_back(k.name);
        loaded.cpuLauncher = ascend::simulatorLauncher(chip, std::move(names), log); // and keep what each did
      });
  result.simulated = log->launches();
  return result;
}

CpuRunResult runOnDevice(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                         const std::map<std::string, TensorView> &inputs, const Schedule &schedule,
                         const Target &target, const CudaDriver &driver) {
  BoundCall call = bindCall(op, dtype, attrs, inputs);
  Specialization spec{dtype, call.statics(op), target, schedule, call.present};
  CompiledOp compiled = compile(op, spec);
  CpuRunResult result;
  result.compileTimes = compiled.times;
  auto context = std::make_shared<const CudaContext>(driver, 0);
  std::shared_ptr<const dsl::OpDef> borrowed(&op, [](const dsl::OpDef *) {});
  Kernel kernel(makeLoadedOp(borrowed, spec, kernelMetas(compiled), compiled.workspace, compiled.ptx, nullptr, &driver, context), attrs);

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
    CudaContext::Scope current(driver, context.get());
    kernel.launch(tensors);
    driver.check(driver.api().ctxSynchronize(), "cuCtxSynchronize");
  }
  for (auto &[name, out] : result.outputs)
    device.download(out, tensors.at(name));
  return result;
}

} // namespace moec
