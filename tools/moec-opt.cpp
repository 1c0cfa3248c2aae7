//===- moec-opt.cpp - Runs moe passes on .mlir files --------------------===//
//
// MlirOptMain with the moe dialect, its passes, and the upstream passes the pipeline uses, so every pass
// runs alone: `moec-opt --moe-specialize="bind=H=8" x.mlir --mlir-print-ir-after-all`; and the whole
// pipeline table as `moec emit` runs it: `moec-opt --moe-pipeline="target=ptx bindings=H=7168,top_k=8"`
// on `moec emit --emit gen`'s IR.
//===----------------------------------------------------------------------===//
#include "moec/compiler/PipelineTable.h"
#include "moec/compiler/Registration.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  moec::registerMoecDialects(registry);
  moec::registerMoecPasses();
  moec::registerMoePipeline();
  mlir::registerTransformsPasses();
  mlir::registerConversionPasses();
  mlir::arith::registerArithPasses(); // arith-expand (bf16 rounding as integer ops)
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "moec optimizer driver\n", registry));
}
