//===- CpuRun.cpp - Compile and run an op on host tensors -----------------===//
#include "moec/runtime/CpuRun.h"

#include "moec/Runtime.h"

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

} // namespace moec
