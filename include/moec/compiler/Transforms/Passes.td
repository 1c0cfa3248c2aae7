//===- Passes.td - moe dialect passes ----------------------*- tablegen -*-===//
//
// One pass per file under compiler/Transforms/, each with a lit test under tests/lit/. The order they run
// in is compiler/PipelineTable.cpp. The passes are defined in the files included below, by stage and target.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_PASSES_TD
#define MOE_PASSES_TD

include "mlir/Pass/PassBase.td"

include "moec/compiler/Transforms/MoePasses.td"
include "moec/compiler/Transforms/LoopPasses.td"
include "moec/compiler/Transforms/Bf16Passes.td"
include "moec/compiler/Transforms/GpuPasses.td"
include "moec/compiler/Transforms/AscendPasses.td"

#endif // MOE_PASSES_TD
