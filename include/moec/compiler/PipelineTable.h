//===- PipelineTable.h - The passes compile() runs, as data ------*- C++ -*-===//
//
// The pipeline is one table (PipelineTable.cpp) of {stage, pass, optimization bit, targets}, read top to
// bottom. compile() runs it stage by stage; moec-opt runs the same table as one pipeline,
// `--moe-pipeline="target=ptx bindings=H=7168,top_k=8 ..."`, so that what `moec emit` runs can be replayed
// on the IR genMoe made (`moec emit --emit gen`).
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/contracts/Schedule.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace mlir {
class OpPassManager;
}

namespace moec {

namespace ascend {
struct Chip;
}

/// The pass managers of compile(), in order; the table's rows run in one of them.
enum class PipelineStage { Moe, Loops, Llvm };

/// Everything the table's rows decide on: the target, the schedule asked for (0: the compiler's choice),
/// the static values, and the facts of the host that CPU code depends on.
struct PipelineConfig {
  TargetKind target = TargetKind::CPU;
  bool simulated = false; // Ascend: the tiled kernels are compiled for the UB simulator on the host
  Schedule schedule;
  std::map<std::string, int64_t> statics; // moe-specialize's bindings
  /// Ascend: the chip's UB and copy figures moe-plan-ascend plans with.
  struct Chip {
    std::string name;
    int64_t ubBytes = 0, ubAlignment = 32, maxCopyBytes = 65536;
    double dataCopyNs = 0, gmGBpsPerCore = 0;
  };
  std::optional<Chip> chip;
  bool nativeBf16Roundings = false; // the host has AVX512-BF16 (hostHasNativeBf16Rounding)
  int64_t vectorLanes = 8;          // f32 lanes of the host's widest vector (hostVectorLanes)

  bool on(Optimization o) const { return optimizationOn(schedule, o); }
};

/// The figures of `chip` that the pipeline plans with.
PipelineConfig::Chip chipFigures(const ascend::Chip &chip);

/// Adds the passes of `stage` for `config`, in the table's order.
void addPipelineStage(mlir::OpPassManager &pm, PipelineStage stage, const PipelineConfig &config);

/// The optimizations whose bits can change what compile() makes for `target`: the bits of the table's
/// rows for that target, and of the options those rows read. Turning any other one off changes nothing.
uint32_t optimizationsFor(TargetKind target);

/// `--moe-pipeline` for moec-opt: the whole table, stage after stage, from genMoe's IR.
void registerMoePipeline();

} // namespace moec
