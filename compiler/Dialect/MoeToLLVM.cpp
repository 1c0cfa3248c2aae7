//===- MoeToLLVM.cpp - moe.view and the Ascend ops to the LLVM dialect ----===//
//
// moe.view is the only moe op of the CPU and GPU targets that reaches the LLVM conversion (compute and
// sum are lowered to loops before). The Ascend ops (moe.ub_alloc, moe.data_copy, ...) reach it when a tiled
// kernel is compiled for the CPU simulator: each becomes an indirect call through the core's runtime, the
// hook table of moec/runtime/ascend/SimHooks.h, and #moe.ub buffers become ordinary memory.
// Lowered through the ConvertToLLVMPatternInterface, so both upstream `convert-to-llvm` (CPU) and
// `convert-gpu-to-nvvm` (GPU) pick them up without a pass of our own.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/runtime/ascend/SimHooks.h"

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

/// moe.guarded_load. On the GPU (inside a gpu.module): inline PTX that zeroes the result's 32-bit words and
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
    int64_t bytes = lanes * int64_t(element.getIntOrFloatBitWidth()) / 8;
    if (!op->getParentOfType<gpu::GPUModuleOp>()) {
      auto wide = VectorType::get({lanes}, getTypeConverter()->convertType(element));
      Value mask =
          LLVM::ConstantOp::create(rewriter, loc, VectorType::get({lanes}, rewriter.getI1Type()),
                                   DenseElementsAttr::get(VectorType::get({lanes}, rewriter.getI1Type()), true));
      mask = LLVM::SelectOp::create(
          rewriter, loc, adaptor.getGuard(), mask,
          LLVM::ConstantOp::create(rewriter, loc, mask.getType(),
                                   DenseElementsAttr::get(cast<ShapedType>(mask.getType()), false)));
      Value zero = LLVM::ZeroOp::create(rewriter, loc, wide);
      Value loaded = LLVM::MaskedLoadOp::create(rewriter, loc, wide, address, mask, zero,
                                                rewriter.getI32IntegerAttr(int32_t(elementBytes(memref))));
      rewriter.replaceOp(
          op, vector
                  ? loaded
                  : LLVM::ExtractElementOp::create(rewriter, loc, loaded, i64Constant(rewriter, loc, 0)).getResult());
      return success();
    }
    int64_t words = bytes / 4;
    std::string outputs, constraints, zeroes;
    for (int64_t w = 0; w < words; ++w) {
      outputs += (w ? ", $" : "$") + std::to_string(w);
      constraints += "=r,";
      zeroes += "mov.b32 $" + std::to_string(w) + ", 0;\n";
    }
    std::string width = words == 1 ? "" : ".v" + std::to_string(words);
    std::string target = words == 1 ? outputs : "{" + outputs + "}";
    std::string asmText = "{\n.reg .pred %moe_p;\n.reg .b64 %moe_a;\nsetp.ne.b32 %moe_p, $" +
                          std::to_string(words + 1) + ", 0;\ncvta.to.global.u64 %moe_a, $" + std::to_string(words) +
                          ";\n" + zeroes + "@%moe_p ld.global" + (op.getReadonly() ? ".nc" : "") + width + ".b32 " +
                          target + ", [%moe_a];\n}";
    constraints += "l,r";
    auto i32 = rewriter.getI32Type();
    Type asmResult =
        words == 1 ? Type(i32) : LLVM::LLVMStructType::getLiteral(rewriter.getContext(), SmallVector<Type>(words, i32));
    Value guard = LLVM::ZExtOp::create(rewriter, loc, i32, adaptor.getGuard());
    auto loaded = LLVM::InlineAsmOp::create(rewriter, loc, asmResult, ValueRange{address, guard}, asmText, constraints,
                                            /*has_side_effects=*/!op.getReadonly(), /*is_align_stack=*/false,
                                            LLVM::tailcallkind::TailCallKind::None,
                                            LLVM::AsmDialectAttr::get(rewriter.getContext(), LLVM::AsmDialect::AD_ATT),
                                            /*operand_attrs=*/ArrayAttr());
    Value bits;
    if (words == 1) {
      bits = loaded.getResult(0);
    } else {
      auto wordsType = VectorType::get({words}, i32);
      bits = LLVM::PoisonOp::create(rewriter, loc, wordsType);
      for (int64_t w = 0; w < words; ++w)
        bits = LLVM::InsertElementOp::create(rewriter, loc, bits,
                                             LLVM::ExtractValueOp::create(rewriter, loc, loaded.getResult(0), w),
                                             i64Constant(rewriter, loc, w));
    }
    rewriter.replaceOp(op, LLVM::BitcastOp::create(rewriter, loc, result, bits));
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
                 ScalarReadOpLowering, GuardedLoadOpLowering>(converter);
  }
};
} // namespace

void moec::moe::registerConvertMoeToLLVMInterface(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *, MoeDialect *dialect) { dialect->addInterfaces<MoeToLLVMInterface>(); });
}
