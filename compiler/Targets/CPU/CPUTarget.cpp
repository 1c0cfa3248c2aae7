//===- CPUTarget.cpp - LLVM IR to host code, JIT-compiled in process -----===//
#include "Targets/CodeGen.h"

#include "moec/contracts/Half.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unistd.h>

namespace moec {

static void initializeHost() {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser(); // moe-native-bf16-roundings emits inline asm
  });
}

static std::string errorText(llvm::Error error) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << error;
  return text;
}

static llvm::orc::JITTargetMachineBuilder hostBuilder() {
  initializeHost();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    throw std::runtime_error("cannot detect the host CPU: " + errorText(builder.takeError()));
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  // With AVX512-BF16 or AVX-NE-CONVERT, LLVM carries bf16 values (phis, selects) as f32 and narrows them
  // with vcvtneps2bf16, which flushes subnormals. Without them bf16 values stay 16-bit integers; the
  // pipeline rounds explicitly (arith-expand), so no conversion instruction is needed at all.
  builder->getFeatures().AddFeature("avx512bf16", false);
  builder->getFeatures().AddFeature("avxneconvert", false);
  return std::move(*builder);
}

llvm::TargetMachine &hostTargetMachine() {
  thread_local std::unique_ptr<llvm::TargetMachine> machine;
  if (!machine) {
    auto tm = hostBuilder().createTargetMachine();
    if (!tm)
      throw std::runtime_error("cannot create the host target machine: " + errorText(tm.takeError()));
    machine = std::move(*tm);
  }
  return *machine;
}

/// `void <name>_packed(void **args)`: loads each argument from args[i] and calls the kernel.
static void addPackedWrapper(llvm::Module &module, llvm::Function &kernel) {
  llvm::LLVMContext &ctx = module.getContext();
  auto *ptrType = llvm::PointerType::getUnqual(ctx);
  auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptrType}, false);
  auto *wrapper = llvm::Function::Create(type, llvm::Function::ExternalLinkage, kernel.getName() + "_packed", module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", wrapper));
  llvm::SmallVector<llvm::Value *> args;
  for (auto [i, param] : llvm::enumerate(kernel.args())) {
    llvm::Value *slot = b.CreateLoad(ptrType, b.CreateConstGEP1_64(ptrType, wrapper->getArg(0), i));
    args.push_back(b.CreateLoad(param.getType(), slot));
  }
  b.CreateCall(&kernel, args);
  b.CreateRetVoid();
}

namespace {

/// f32 -> bf16, round to nearest even, subnormals kept, NaN quiet: the libcall LLVM emits to narrow a bf16
/// value it carried as f32. Older libgcc lacks it, and it must not flush subnormals.
extern "C" __bf16 moecTruncSfBf2(float x) {
  uint16_t bits = floatToBf16(x);
  __bf16 out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

class OrcExecutable : public CpuExecutable {
public:
  explicit OrcExecutable(std::unique_ptr<llvm::orc::LLJIT> jit) : jit(std::move(jit)) {}

  PackedKernelFn lookup(const std::string &name) override {
    auto address = jit->lookup(name + "_packed");
    if (!address) {
      llvm::consumeError(address.takeError());
      return nullptr;
    }
    return address->toPtr<PackedKernelFn>();
  }

private:
  std::unique_ptr<llvm::orc::LLJIT> jit;
};
} // namespace

/// The i16 type with the shape of a bf16 (vector) type.
static llvm::Type *bitsType(llvm::Type *t) {
  llvm::Type *i16 = llvm::Type::getInt16Ty(t->getContext());
  if (auto *v = llvm::dyn_cast<llvm::VectorType>(t))
    return llvm::VectorType::get(i16, v->getElementCount());
  return i16;
}

static bool isBf16(llvm::Type *t) { return t->getScalarType()->isBFloatTy(); }

void moveBf16AsBits(llvm::Module &module) {
  llvm::SmallVector<llvm::Instruction *> accesses;
  for (llvm::Function &f : module)
    for (llvm::Instruction &i : llvm::instructions(f)) {
      if (auto *load = llvm::dyn_cast<llvm::LoadInst>(&i); load && isBf16(load->getType()))
        accesses.push_back(load);
      if (auto *store = llvm::dyn_cast<llvm::StoreInst>(&i); store && isBf16(store->getValueOperand()->getType()))
        accesses.push_back(store);
    }
  for (llvm::Instruction *i : accesses) {
    llvm::IRBuilder<> b(i);
    if (auto *load = llvm::dyn_cast<llvm::LoadInst>(i)) {
      llvm::LoadInst *bits = b.CreateAlignedLoad(bitsType(load->getType()), load->getPointerOperand(), load->getAlign());
      bits->copyMetadata(*load); // !nontemporal, alias scopes
      load->replaceAllUsesWith(b.CreateBitCast(bits, load->getType()));
    } else {
      auto *store = llvm::cast<llvm::StoreInst>(i);
      llvm::Value *value = store->getValueOperand();
      llvm::StoreInst *bits = b.CreateAlignedStore(b.CreateBitCast(value, bitsType(value->getType())),
                                                   store->getPointerOperand(), store->getAlign());
      bits->copyMetadata(*store); // !nontemporal: streaming stores stay streaming
    }
    i->eraseFromParent();
  }
}

std::string emitHostObject(llvm::Module &module, llvm::TargetMachine &tm, const std::vector<std::string> &kernelNames) {
  for (const std::string &name : kernelNames) {
    llvm::Function *kernel = module.getFunction(name);
    if (!kernel)
      throw std::runtime_error("kernel '" + name + "' missing from the LLVM module");
    addPackedWrapper(module, *kernel);
  }
  return runBackend(module, tm, llvm::CodeGenFileType::ObjectFile);
}

/// MOEC_PERF_MAP=1: appends the loaded kernels' addresses to /tmp/perf-<pid>.map, the file `perf report`
/// reads to name JIT-compiled code (a profiling aid; nothing else reads it).
static void appendPerfMap(llvm::orc::LLJIT &jit, const std::string &object) {
  const char *enabled = std::getenv("MOEC_PERF_MAP");
  if (!enabled || std::string(enabled) != "1")
    return;
  auto file = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(object, "moec-kernels.o"));
  if (!file) {
    llvm::consumeError(file.takeError());
    return;
  }
  std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
  std::FILE *map = std::fopen(path.c_str(), "a");
  if (!map)
    return;
  for (const llvm::object::SymbolRef &symbol : (*file)->symbols()) {
    auto name = symbol.getName();
    auto type = symbol.getType();
    if (!name || !type || *type != llvm::object::SymbolRef::ST_Function) {
      llvm::consumeError(name.takeError());
      llvm::consumeError(type.takeError());
      continue;
    }
    auto address = jit.lookup(*name);
    if (!address) {
      llvm::consumeError(address.takeError());
      continue;
    }
    uint64_t size = llvm::object::ELFSymbolRef(symbol).getSize();
    std::fprintf(map, "%llx %llx %s\n", (unsigned long long)address->getValue(), (unsigned long long)size,
                 name->str().c_str());
  }
  std::fclose(map);
}

std::unique_ptr<CpuExecutable> loadHostObject(const std::string &object) {
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(hostBuilder()).create();
  if (!jit)
    throw std::runtime_error("cannot create the JIT: " + errorText(jit.takeError()));
  llvm::orc::JITDylib &main = (*jit)->getMainJITDylib();
  llvm::orc::SymbolMap runtimeSymbols;
  runtimeSymbols[(*jit)->mangleAndIntern("__truncsfbf2")] = {
      llvm::orc::ExecutorAddr::fromPtr(&moecTruncSfBf2), llvm::JITSymbolFlags::Exported};
  if (auto error = main.define(llvm::orc::absoluteSymbols(std::move(runtimeSymbols))))
    throw std::runtime_error("cannot define JIT runtime symbols: " + errorText(std::move(error)));
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object, "moec-kernels.o");
  if (auto error = (*jit)->addObjectFile(std::move(buffer)))
    throw std::runtime_error("cannot load the kernel object: " + errorText(std::move(error)));
  appendPerfMap(**jit, object);
  return std::make_unique<OrcExecutable>(std::move(*jit));
}

bool hostHasNativeBf16Rounding() {
  static const bool has = [] {
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    return features.lookup("avx512bf16") && features.lookup("avx512dq") && features.lookup("avx512f");
  }();
  return has;
}

std::string hostToolchain() {
  llvm::TargetMachine &tm = hostTargetMachine();
  return tm.getTargetTriple().str() + " " + tm.getTargetCPU().str() + " " + tm.getTargetFeatureString().str();
}

const char *llvmVersion() { return LLVM_VERSION_STRING; }

std::string emitHostAsm(llvm::Module &module, llvm::TargetMachine &tm) {
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module); // code generation changes the module
  return runBackend(*copy, tm, llvm::CodeGenFileType::AssemblyFile);
}

} // namespace moec
