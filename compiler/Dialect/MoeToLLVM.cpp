//===- MoeToLLVM.cpp - moe.view and the Ascend ops to the LLVM dialect ----===//
//
// moe.view is the only moe op of the CPU and GPU targets that reaches the LLVM conversion (compute and
// sum are lowered to loops before). The Ascend ops (moe.ub_alloc, moe.data_copy, ...) reach it when a tiled
// kernel is compiled for the CPU simulator: each becomes an indirect call through the core's runtime, the
// hook table of moec/contracts/ascend/SimHooks.h, and #moe.ub buffers become ordinary memory.
// Lowered through the ConvertToLLVMPatternInterface, so both upstream `convert-to-llvm` (CPU) and
// `convert-gpu-to-nvvm` (GPU) pick them up without a pass of our own.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/contracts/ascend/SimHooks.h"

#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"
#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace moec::moe;
using namespace moec::ascend;

namespace {
/// Builds {ptr, ptr, 0, sizes..., row-major strides...} from the bare pointer and the sizes.
struct ViewOpLowering : ConvertOpToLLVMPattern<ViewOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult matchAndRewrite(ViewOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType type = op.getType();
    Type descriptorType = getTypeConverter()->convertType(type);
    if (!descriptorType)
      return rewriter.notifyMatchFailure(op, "memref type not convertible");
    auto desc = MemRefDescriptor::poison(rewriter, loc, descriptorType);
    desc.setAllocatedPtr(rewriter, loc, adaptor.getPtr());
    desc.setAlignedPtr(rewriter, loc, adaptor.getPtr());
    desc.setConstantOffset(rewriter, loc, 0);
    Value stride = createIndexAttrConstant(rewriter, loc, getIndexType(), 1);
    for (int64_t pos = type.getRank() - 1; pos >= 0; --pos) {
      Value size = adaptor.getSizes()[pos];
      desc.setSize(rewriter, loc, pos, size);
      desc.setStride(rewriter, loc, pos, stride);
      stride = LLVM::MulOp::create(rewriter, loc, stride, size);
    }
    rewriter.replaceOp(op, {desc});
    return success();
  }
};

/// Calls hook `slot` of the runtime's table (SimHooks.h): loads the function pointer and calls it.
Value callHook(ConversionPatternRewriter &rewriter, Location loc, Value runtime, int64_t slot, Type result,
               ValueRange args) {
  auto ptr = LLVM::LLVMPointerType::get(rewriter.getContext());
  Value entry = LLVM::GEPOp::create(rewriter, loc, ptr, ptr, runtime, ArrayRef<LLVM::GEPArg>{int32_t(slot)});
  Value fn = LLVM::LoadOp::create(rewriter, loc, ptr, entry);
  Value simulator = LLVM::LoadOp::create(rewriter, loc, ptr, runtime);
  SmallVector<Value> operands{fn, simulator};
  SmallVector<Type> types{ptr};
  for (Value a : args) {
    operands.push_back(a);
    types.push_back(a.getType());
  }
  auto type = LLVM::LLVMFunctionType::get(result ? result : LLVM::LLVMVoidType::get(rewriter.getContext()), types);
  auto call = LLVM::CallOp::create(rewriter, loc, type, operands);
  return result ? call.getResult() : Value();
}

/// The address of a NUL-terminated constant holding `text`, one global per distinct text.
Value constantString(ConversionPatternRewriter &rewriter, Location loc, Operation *op, StringRef text) {
  auto module = op->getParentOfType<ModuleOp>();
  std::string symbol = ("moe_ub_name_" + text).str();
  auto ptr = LLVM::LLVMPointerType::get(rewriter.getContext());
  if (!module.lookupSymbol<LLVM::GlobalOp>(symbol))
    return LLVM::createGlobalString(loc, rewriter, symbol, text, LLVM::Linkage::Internal);
  return LLVM::AddressOfOp::create(rewriter, loc, ptr, symbol);
}

Value i64Constant(ConversionPatternRewriter &rewriter, Location loc, int64_t v) {
  return LLVM::ConstantOp::create(rewriter, loc, rewriter.getI64Type(), rewriter.getI64IntegerAttr(v));
}

int64_t elementBytes(MemRefType type) { return std::max<int64_t>(1, type.getElementTypeBitWidth() / 8); }

struct UbAllocOpLowering : ConvertOpToLLVMPattern<UbAllocOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(UbAllocOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType type = op.getType();
    auto ptr = LLVM::LLVMPointerType::get(rewriter.getContext());
    Value memory = callHook(rewriter, loc, adaptor.getRuntime(), kUbHookPlace, ptr,
                            {adaptor.getCore(), constantString(rewriter, loc, op, op.getName()),
                             i64Constant(rewriter, loc, op.getOffset()),
                             i64Constant(rewriter, loc, type.getNumElements() * elementBytes(type))});
    rewriter.replaceOp(op, {MemRefDescriptor::fromStaticShape(rewriter, loc, *getTypeConverter(), type, memory)});
    return success();
  }
};

struct UbFreeOpLowering : ConvertOpToLLVMPattern<UbFreeOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(UbFreeOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    callHook(rewriter, op.getLoc(), adaptor.getRuntime(), kUbHookRelease, Type(),
             {adaptor.getCore(), constantString(rewriter, op.getLoc(), op, op.getName())});
    rewriter.eraseOp(op);
    return success();
  }
};

struct DataCopyOpLowering : ConvertOpToLLVMPattern<DataCopyOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(DataCopyOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto sourceType = cast<MemRefType>(op.getSource().getType()), destType = cast<MemRefType>(op.getDest().getType());
    Value source = getStridedElementPtr(rewriter, loc, sourceType, adaptor.getSource(), adaptor.getSourceIndices());
    Value dest = getStridedElementPtr(rewriter, loc, destType, adaptor.getDest(), adaptor.getDestIndices());
    bool toUb = isa_and_nonnull<UbSpaceAttr>(destType.getMemorySpace());
    Value bytes = LLVM::MulOp::create(rewriter, loc, adaptor.getCount(),
                                      createIndexAttrConstant(rewriter, loc, getIndexType(), elementBytes(sourceType)));
    callHook(rewriter, loc, adaptor.getRuntime(), kUbHookCopy, Type(),
             {adaptor.getCore(), i64Constant(rewriter, loc, toUb), toUb ? dest : source, toUb ? source : dest, bytes});
    rewriter.eraseOp(op);
    return success();
  }
};

struct RowDoneOpLowering : ConvertOpToLLVMPattern<RowDoneOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(RowDoneOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    callHook(rewriter, op.getLoc(), adaptor.getRuntime(), kUbHookRowDone, Type(), {adaptor.getCore(), adaptor.getRow()});
    rewriter.eraseOp(op);
    return success();
  }
};

struct ScalarReadOpLowering : ConvertOpToLLVMPattern<ScalarReadOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(ScalarReadOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    callHook(rewriter, op.getLoc(), adaptor.getRuntime(), kUbHookScalarRead, Type(),
             {adaptor.getCore(), i64Constant(rewriter, op.getLoc(), op.getBytes())});
    rewriter.eraseOp(op);
    return success();
  }
};

/// A guarded access's value in the registers inline PTX moves: `count` units of `bits` (16 for a 2-byte scalar,
/// else 32-bit words), with the PTX type and the inline-asm constraint of each.
struct PtxUnits {
  int64_t count;
  unsigned bits;
  std::string type() const { return bits == 16 ? ".b16" : ".b32"; }
  std::string constraint() const { return bits == 16 ? "h" : "r"; }
  /// "$first, ..." (in braces when more than one): the operands inline asm names the units by.
  std::string operands(int64_t first) const {
    std::string list;
    for (int64_t u = 0; u < count; ++u)
      list += (u ? ", $" : "$") + std::to_string(first + u);
    return count == 1 ? list : "{" + list + "}";
  }
  std::string width() const { return count == 1 ? "" : ".v" + std::to_string(count); }
};

PtxUnits ptxUnits(Type accessed) {
  int64_t bytes = guardedAccessBytes(accessed); // the verifier allows only these sizes
  return bytes == 2 ? PtxUnits{1, 16} : PtxUnits{bytes / 4, 32};
}

/// The PTX that sets %moe_p from the guard operand `$guard`.
std::string ptxGuardPrologue(int64_t guard) {
  return "{\n.reg .pred %moe_p;\nsetp.ne.b32 %moe_p, $" + std::to_string(guard) + ", 0;\n";
}

/// `generic` as a global-space pointer, the operand of a guarded access's `ld.global`/`st.global`. NVPTX infers
/// the global space of a kernel argument's pointers, so the cast folds away: no cvta to generic and back.
Value globalAddress(ConversionPatternRewriter &rewriter, Location loc, Value generic) {
  return LLVM::AddrSpaceCastOp::create(rewriter, loc, LLVM::LLVMPointerType::get(rewriter.getContext(), 1), generic);
}

/// A mask of `lanes` i1, all on where `guard` holds and all off elsewhere.
Value guardMask(ConversionPatternRewriter &rewriter, Location loc, Value guard, int64_t lanes) {
  auto maskType = VectorType::get({lanes}, rewriter.getI1Type());
  Value on = LLVM::ConstantOp::create(rewriter, loc, maskType, DenseElementsAttr::get(maskType, true));
  Value off = LLVM::ConstantOp::create(rewriter, loc, maskType, DenseElementsAttr::get(maskType, false));
  return LLVM::SelectOp::create(rewriter, loc, guard, on, off);
}

LLVM::InlineAsmOp inlinePtx(ConversionPatternRewriter &rewriter, Location loc, Type result, ValueRange operands,
                            const std::string &text, const std::string &constraints, bool sideEffects) {
  return LLVM::InlineAsmOp::create(rewriter, loc, result, operands, text, constraints, sideEffects,
                                   /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                                   LLVM::AsmDialectAttr::get(rewriter.getContext(), LLVM::AsmDialect::AD_ATT),
                                   /*operand_attrs=*/ArrayAttr());
}

/// moe.guarded_load. On the GPU (inside a gpu.module): inline PTX that zeroes the result's registers and
/// loads them under a predicate, one basic block with no branch (LLVM has no predicated load: NVPTX makes
/// llvm.masked.load a branch around the load). Elsewhere: llvm.masked.load with zero where it is off.
struct GuardedLoadOpLowering : ConvertOpToLLVMPattern<GuardedLoadOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(GuardedLoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto memref = cast<MemRefType>(op.getMemref().getType());
    Type result = getTypeConverter()->convertType(op.getType());
    if (!result)
      return rewriter.notifyMatchFailure(op, "result type not convertible");
    Value address = getStridedElementPtr(rewriter, loc, memref, adaptor.getMemref(), adaptor.getIndices());
    auto vector = dyn_cast<VectorType>(op.getType());
    int64_t lanes = vector ? vector.getNumElements() : 1;
    Type element = vector ? vector.getElementType() : op.getType();
    if (!op->getParentOfType<gpu::GPUModuleOp>()) {
      auto wide = VectorType::get({lanes}, getTypeConverter()->convertType(element));
      Value zero = LLVM::ZeroOp::create(rewriter, loc, wide);
      Value loaded =
          LLVM::MaskedLoadOp::create(rewriter, loc, wide, address, guardMask(rewriter, loc, adaptor.getGuard(), lanes),
                                     zero, rewriter.getI32IntegerAttr(int32_t(elementBytes(memref))));
      rewriter.replaceOp(
          op, vector
                  ? loaded
                  : LLVM::ExtractElementOp::create(rewriter, loc, loaded, i64Constant(rewriter, loc, 0)).getResult());
      return success();
    }
    PtxUnits units = ptxUnits(op.getType());
    std::string constraints, zeroes;
    for (int64_t u = 0; u < units.count; ++u) {
      constraints += "=" + units.constraint() + ",";
      zeroes += "mov" + units.type() + " $" + std::to_string(u) + ", 0;\n";
    }
    std::string asmText = ptxGuardPrologue(units.count + 1) + zeroes + "@%moe_p ld.global" +
                          (op.getReadonly() ? ".nc" : "") + units.width() + units.type() + " " + units.operands(0) +
                          ", [$" + std::to_string(units.count) + "];\n}";
    constraints += "l,r";
    Type unit = rewriter.getIntegerType(units.bits);
    Type asmResult = units.count == 1 ? unit
                                      : LLVM::LLVMStructType::getLiteral(rewriter.getContext(),
                                                                         SmallVector<Type>(units.count, unit));
    Value guard = LLVM::ZExtOp::create(rewriter, loc, rewriter.getI32Type(), adaptor.getGuard());
    auto loaded = inlinePtx(rewriter, loc, asmResult, ValueRange{globalAddress(rewriter, loc, address), guard}, asmText,
                            constraints,
                            /*sideEffects=*/!op.getReadonly());
    Value bits;
    if (units.count == 1) {
      bits = loaded.getResult(0);
    } else {
      auto unitsType = VectorType::get({units.count}, unit);
      bits = LLVM::PoisonOp::create(rewriter, loc, unitsType);
      for (int64_t u = 0; u < units.count; ++u)
        bits = LLVM::InsertElementOp::create(rewriter, loc, bits,
                                             LLVM::ExtractValueOp::create(rewriter, loc, loaded.getResult(0), u),
                                             i64Constant(rewriter, loc, u));
    }
    rewriter.replaceOp(op, LLVM::BitcastOp::create(rewriter, loc, result, bits));
    return success();
  }
};

/// moe.guarded_store. On the GPU: inline PTX that stores the value's registers under a predicate, with no
/// branch (NVPTX makes llvm.masked.store one). Elsewhere: llvm.masked.store.
struct GuardedStoreOpLowering : ConvertOpToLLVMPattern<GuardedStoreOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(GuardedStoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto memref = cast<MemRefType>(op.getMemref().getType());
    Type stored = op.getValue().getType();
    Value address = getStridedElementPtr(rewriter, loc, memref, adaptor.getMemref(), adaptor.getIndices());
    auto vector = dyn_cast<VectorType>(stored);
    int64_t lanes = vector ? vector.getNumElements() : 1;
    Value value = adaptor.getValue();
    if (!op->getParentOfType<gpu::GPUModuleOp>()) {
      if (!vector) {
        auto wide = VectorType::get({1}, value.getType());
        value = LLVM::InsertElementOp::create(rewriter, loc, LLVM::PoisonOp::create(rewriter, loc, wide), value,
                                              i64Constant(rewriter, loc, 0));
      }
      LLVM::MaskedStoreOp::create(rewriter, loc, value, address, guardMask(rewriter, loc, adaptor.getGuard(), lanes),
                                  uint32_t(elementBytes(memref)));
      rewriter.eraseOp(op);
      return success();
    }
    PtxUnits units = ptxUnits(stored);
    Type unit = rewriter.getIntegerType(units.bits);
    SmallVector<Value> operands;
    std::string constraints;
    if (units.count == 1) {
      operands.push_back(LLVM::BitcastOp::create(rewriter, loc, unit, value));
    } else {
      Value unitsValue = LLVM::BitcastOp::create(rewriter, loc, VectorType::get({units.count}, unit), value);
      for (int64_t u = 0; u < units.count; ++u)
        operands.push_back(LLVM::ExtractElementOp::create(rewriter, loc, unitsValue, i64Constant(rewriter, loc, u)));
    }
    for (int64_t u = 0; u < units.count; ++u)
      constraints += units.constraint() + ",";
    constraints += "l,r";
    operands.push_back(globalAddress(rewriter, loc, address));
    operands.push_back(LLVM::ZExtOp::create(rewriter, loc, rewriter.getI32Type(), adaptor.getGuard()));
    std::string asmText = ptxGuardPrologue(units.count + 1) + "@%moe_p st.global" + units.width() + units.type() +
                          " [$" + std::to_string(units.count) + "], " + units.operands(0) + ";\n}";
    inlinePtx(rewriter, loc, Type(), operands, asmText, constraints, /*sideEffects=*/true);
    rewriter.eraseOp(op);
    return success();
  }
};

struct MoeToLLVMInterface : ConvertToLLVMPatternInterface {
  using ConvertToLLVMPatternInterface::ConvertToLLVMPatternInterface;
  void populateConvertToLLVMConversionPatterns(ConversionTarget &, LLVMTypeConverter &converter,
                                               RewritePatternSet &patterns) const final {
    // UB buffers are ordinary memory in the simulator (address space 0).
    converter.addTypeAttributeConversion([](BaseMemRefType type, UbSpaceAttr) -> Attribute {
      return IntegerAttr::get(IntegerType::get(type.getContext(), 64), 0);
    });
    patterns.add<ViewOpLowering, UbAllocOpLowering, UbFreeOpLowering, DataCopyOpLowering, RowDoneOpLowering,
                 ScalarReadOpLowering, GuardedLoadOpLowering, GuardedStoreOpLowering>(converter);
  }
};
} // namespace

void moec::moe::registerConvertMoeToLLVMInterface(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *, MoeDialect *dialect) { dialect->addInterfaces<MoeToLLVMInterface>(); });
}
