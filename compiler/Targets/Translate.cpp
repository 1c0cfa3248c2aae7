//===- Translate.cpp - LLVM dialect to LLVM IR, parameter attributes set directly ---===//
//
// MLIR's translation converts each function parameter's attributes through a table of every LLVM
// attribute name, which it builds anew for every parameter that has any attribute: some 0.2 ms a
// parameter, a sixth of compiling a small kernel (A3's row copy: 24 parameters in two kernels). A kernel's
// parameters carry at most a few plain LLVM attributes (noalias, readonly) and moe's own (moe.arg, which the
// translation has nothing to do with), so they are taken off before the translation and the LLVM ones are
// set on the llvm::Function's arguments after it. Anything else (a type or a range attribute) is left to
// the translation.
//===----------------------------------------------------------------------===//
#include "Targets/CodeGen.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/Attributes.h"
#include "llvm/IR/Module.h"

#include <map>
#include <optional>
#include <vector>

namespace moec {

namespace {

/// A parameter attribute set after the translation: its LLVM kind, and the integer an int attribute holds.
struct ParameterAttr {
  unsigned argument;
  llvm::Attribute::AttrKind kind;
  std::optional<uint64_t> value;
};

/// The plain LLVM attribute that `attr` names ("llvm.noalias" -> NoAlias), if it is a unit or an integer
/// attribute of an enum or int kind.
std::optional<ParameterAttr> plainLlvmAttr(unsigned argument, mlir::NamedAttribute attr) {
  llvm::StringRef name = attr.getName().getValue();
  if (!name.consume_front("llvm."))
    return std::nullopt;
  llvm::Attribute::AttrKind kind = llvm::Attribute::getAttrKindFromName(name);
  if (kind == llvm::Attribute::None)
    return std::nullopt;
  if (llvm::isa<mlir::UnitAttr>(attr.getValue()) && llvm::Attribute::isEnumAttrKind(kind))
    return ParameterAttr{argument, kind, std::nullopt};
  if (auto integer = llvm::dyn_cast<mlir::IntegerAttr>(attr.getValue()); integer && llvm::Attribute::isIntAttrKind(kind))
    return ParameterAttr{argument, kind, integer.getValue().getZExtValue()};
  return std::nullopt;
}

} // namespace

std::unique_ptr<llvm::Module> translateToLlvmIr(mlir::Operation *module, llvm::LLVMContext &context,
                                                llvm::StringRef name) {
  std::map<std::string, std::vector<ParameterAttr>> deferred; // by function name
  module->walk([&](mlir::LLVM::LLVMFuncOp func) {
    std::vector<ParameterAttr> attrs;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      mlir::DictionaryAttr dict = func.getArgAttrDict(i);
      if (!dict)
        continue;
      for (mlir::NamedAttribute attr : dict) {
        if (auto plain = plainLlvmAttr(i, attr))
          attrs.push_back(*plain);
        else if (attr.getName().getValue().starts_with("llvm."))
          return; // one the translation must convert: leave this function's as they are
      }
    }
    func.removeArgAttrsAttr();
    deferred[func.getSymName().str()] = std::move(attrs);
  });
  std::unique_ptr<llvm::Module> result = mlir::translateModuleToLLVMIR(module, context, name);
  if (!result)
    return result;
  for (const auto &[function, attrs] : deferred) {
    llvm::Function *f = result->getFunction(function);
    if (!f)
      continue;
    for (const ParameterAttr &a : attrs)
      f->addParamAttr(a.argument, a.value ? llvm::Attribute::get(context, a.kind, *a.value)
                                          : llvm::Attribute::get(context, a.kind));
  }
  return result;
}

} // namespace moec
