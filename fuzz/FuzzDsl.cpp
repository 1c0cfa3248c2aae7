//===- FuzzDsl.cpp - libFuzzer: .moe text -> parse, sema, moe MLIR ------------===//
//
// The input is the text of one op definition. It is parsed and checked (dsl::loadOpText); when it is
// accepted, genMoe emits the moe dialect for the op's first allowed dtype, with the static attributes'
// defaults and either no optional tensor or every optional input present (by the input's parity), and
// the module must verify. DslError, GenError and CompileError are expected outcomes; anything else
// (another exception, a sanitizer report, an invalid module) is a finding.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Frontend/MoeGen.h"
#include "moec/compiler/Pipeline.h"
#include "moec/compiler/Registration.h"
#include "moec/dsl/Diagnostics.h"
#include "moec/dsl/Parser.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdio>
#include <cstdlib>

using namespace moec;

namespace {

const mlir::DialectRegistry &registry() {
  static const mlir::DialectRegistry instance = [] {
    mlir::DialectRegistry r;
    registerMoecDialects(r);
    return r;
  }();
  return instance;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024)
    return -1; // not added to the corpus
  std::string text(reinterpret_cast<const char *>(data), size);
  std::unique_ptr<dsl::OpDef> op;
  try {
    op = dsl::loadOpText("fuzz.moe", text);
  } catch (const dsl::DslError &) {
    return 0;
  }

  Specialization spec;
  spec.dtype = op->allowedTypes.empty() ? dsl::DType::F32 : op->allowedTypes.front();
  std::set<std::string> inputs;
  if (size % 2 == 0)
    for (const dsl::TensorDecl &t : op->tensors)
      if (t.optional && !t.isOutput)
        inputs.insert(t.name);
  try {
    spec.present = inputs;
    ResolvedSpecialization resolved = resolve(*op, spec);
    const std::map<std::string, int64_t> &statics = resolved.statics;
    const std::set<std::string> &present = resolved.present;
    mlir::MLIRContext context(registry(), mlir::MLIRContext::Threading::DISABLED);
    context.printOpOnDiagnostic(false);
    MoeModule generated = genMoe(context, *op, spec.dtype, present, statics);
    if (mlir::failed(mlir::verify(*generated.module))) {
      std::fprintf(stderr, "fuzz-dsl: genMoe produced a module that does not verify:\n");
      generated.module->print(llvm::errs());
      std::abort();
    }
  } catch (const GenError &) {
  } catch (const CompileError &) {
  } catch (const dsl::DslError &) {
  }
  return 0;
}
