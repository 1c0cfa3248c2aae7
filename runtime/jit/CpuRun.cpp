//===- CpuRun.cpp - Compile and run an op on host tensors -----------------===//
#include "moec/runtime/CpuRun.h"

#include "moec/Runtime.h"
#include "moec/runtime/CudaDriver.h"

namespace moec {

CpuRunResult runOnCpu(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                      const std::map<std::string, TensorView> &inputs, const Schedule &schedule) {
  BoundCall call = bindCall(op, dtype, attrs, inputs);
  Specialization spec{dtype, call.statics(op), Target::cpu(), schedule, call.present};
  CompiledOp compiled = compile(op, spec);

  CpuRunResult result;
  result.compileTimes = compiled.times;
  // The caller owns `op` for the whole call; the kernel only borrows it.
  std::shared_ptr<const dsl::OpDef> borrowed(&op, [](const dsl::OpDef *) {});
  Kernel kernel(makeLoadedOp(borrowed, spec, kernelMetas(compiled), "", std::move(compiled.cpu), nullptr), attrs);
  std::map<std::string, TensorView> tensors = inputs;
  for (const auto &[name, shape] : call.outputShapes) {
    auto [it, _] = result.outputs.emplace(name, HostTensor(op.findTensor(name)->elem.resolve(dtype), shape));
    tensors[name] = it->second.view();
  }
  kernel.launch(tensors);
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
  Kernel kernel(makeLoadedOp(borrowed, spec, kernelMetas(compiled), compiled.ptx, nullptr, &driver, context), attrs);

  std::vector<std::unique_ptr<CudaBuffer>> buffers;
  auto deviceCopy = [&](const TensorView &host, size_t bytes, bool copy) {
    auto &b = buffers.emplace_back(std::make_unique<CudaBuffer>(driver, std::max<size_t>(bytes, 1), context));
    if (copy && bytes)
      driver.check(driver.api().memcpyHtoD(b->pointer(), host.data, bytes), "cuMemcpyHtoD");
    TensorView v = host;
    v.data = reinterpret_cast<void *>(b->pointer());
    v.device = Device::Cuda;
    return v;
  };
  std::map<std::string, TensorView> tensors;
  for (const auto &[name, view] : inputs)
    tensors[name] = view.data ? deviceCopy(view, size_t(view.elements()) * dtypeBytes(view.dtype), true) : view;
  for (const auto &[name, shape] : call.outputShapes) {
    auto [it, _] = result.outputs.emplace(name, HostTensor(op.findTensor(name)->elem.resolve(dtype), shape));
    tensors[name] = deviceCopy(it->second.view(), it->second.bytes(), false);
  }
  kernel.launch(tensors);
  driver.check(driver.api().ctxSynchronize(), "cuCtxSynchronize");
  for (auto &[name, out] : result.outputs)
    if (out.bytes())
      driver.check(driver.api().memcpyDtoH(out.raw(), reinterpret_cast<CUdeviceptr>(tensors.at(name).data), out.bytes()),
                   "cuMemcpyDtoH");
  return result;
}

} // namespace moec
