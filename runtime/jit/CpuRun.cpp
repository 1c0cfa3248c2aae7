//===- CpuRun.cpp - Compile and run an op on host tensors -----------------===//
#include "moec/runtime/CpuRun.h"

#include "moec/runtime/CpuLauncher.h"

namespace moec {

CpuRunResult runOnCpu(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                      const std::map<std::string, TensorView> &inputs, const Schedule &schedule) {
  BoundCall call = bindCall(op, dtype, attrs, inputs);
  Specialization spec{dtype, call.statics(op), Target::cpu(), schedule, call.present};
  CompiledOp compiled = compile(op, spec);

  CpuRunResult result;
  result.compileTimes = compiled.times;
  std::vector<void *> tensors;
  for (const dsl::TensorDecl &t : op.tensors) {
    if (!t.isOutput) {
      auto it = inputs.find(t.name);
      tensors.push_back(it == inputs.end() ? nullptr : it->second.data); // absent optional: null
      continue;
    }
    auto shape = call.outputShapes.find(t.name);
    if (shape == call.outputShapes.end()) {
      tensors.push_back(nullptr);
      continue;
    }
    auto [it, _] = result.outputs.emplace(t.name, HostTensor(t.elem.resolve(dtype), shape->second));
    tensors.push_back(it->second.raw());
  }
  std::vector<int64_t> scalars = call.kernelScalars(op);
  for (const KernelInfo &kernel : compiled.kernels) {
    PackedKernelFn fn = compiled.cpu->lookup(kernel.name);
    if (!fn)
      throw CompileError(op.name + ": kernel '" + kernel.name + "' is missing from the JIT module");
    launchCpu(fn, tensors, scalars, call.rows(kernel.domain), ThreadPool::shared());
  }
  return result;
}

} // namespace moec
