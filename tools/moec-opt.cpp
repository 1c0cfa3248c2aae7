//===- moec-opt.cpp - Runs moe passes on .mlir files --------------------===//
//
// MlirOptMain with the moe dialect, its passes, and the upstream passes the pipeline uses, so every pass
// runs alone: `moec-opt --moe-specialize="bind=H=8" x.mlir --mlir-print-ir-after-all`.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Registration.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  moec::registerMoecDialects(registry);
  moec::registerMoecPasses();
  mlir::registerTransformsPasses();
  mlir::registerConversionPasses();
  mlir::arith::registerArithPasses(); // arith-expand (bf16 rounding as integer ops)
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "moec optimizer driver\n", registry));
}
