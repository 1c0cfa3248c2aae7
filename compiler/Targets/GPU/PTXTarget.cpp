//===- PTXTarget.cpp - LLVM IR to PTX through the NVPTX backend ----------===//
#include "Targets/CodeGen.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Triple.h"

#include <map>
#include <mutex>
#include <stdexcept>

namespace moec {

namespace {
struct PtxArch {
  const char *name;
  const char *features; // the oldest PTX ISA that has the arch, so older drivers can JIT it
};
const PtxArch kArchs[] = {{"sm_80", "+ptx70"}, {"sm_86", "+ptx71"}, {"sm_89", "+ptx78"},
                          {"sm_90", "+ptx80"}, {"sm_100", "+ptx86"}, {"sm_120", "+ptx87"}};

const PtxArch *findArch(const std::string &arch) {
  for (const PtxArch &a : kArchs)
    if (arch == a.name)
      return &a;
  return nullptr;
}
} // namespace

void checkPtxArch(const std::string &arch) {
  if (findArch(arch))
    return;
  std::string known;
  for (const PtxArch &a : kArchs)
    known += std::string(known.empty() ? "" : ", ") + a.name;
  throw std::invalid_argument("unknown GPU arch '" + arch + "' (known: " + known + ")");
}

static std::unique_ptr<llvm::TargetMachine> createNvptxTargetMachine(const std::string &arch) {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  checkPtxArch(arch);
  llvm::Triple triple("nvptx64-nvidia-cuda");
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    throw std::runtime_error("NVPTX backend unavailable: " + error);
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, arch, findArch(arch)->features, llvm::TargetOptions(), std::nullopt, std::nullopt,
      llvm::CodeGenOptLevel::Default));
}

llvm::TargetMachine &nvptxTargetMachine(const std::string &arch) {
  thread_local std::map<std::string, std::unique_ptr<llvm::TargetMachine>> machines;
  std::unique_ptr<llvm::TargetMachine> &tm = machines[arch];
  if (!tm)
    tm = createNvptxTargetMachine(arch);
  return *tm;
}

std::string emitPtx(llvm::Module &module, llvm::TargetMachine &tm) {
  return runBackend(module, tm, llvm::CodeGenFileType::AssemblyFile);
}

} // namespace moec
