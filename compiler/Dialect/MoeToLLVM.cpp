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

struct MoeToLLVMInterface : ConvertToLLVMPatternInterface {
  using ConvertToLLVMPatternInterface::ConvertToLLVMPatternInterface;
  void populateConvertToLLVMConversionPatterns(ConversionTarget &, LLVMTypeConverter &converter,
                                               RewritePatternSet &patterns) const final {
    // UB buffers are ordinary memory in the simulator (address space 0).
    converter.addTypeAttributeConversion([](BaseMemRefType type, UbSpaceAttr) -> Attribute {
      return IntegerAttr::get(IntegerType::get(type.getContext(), 64), 0);
    });
    patterns.add<ViewOpLowering, UbAllocOpLowering, UbFreeOpLowering, DataCopyOpLowering, RowDoneOpLowering,
                 ScalarReadOpLowering>(converter);
  }
};
} // namespace

void moec::moe::registerConvertMoeToLLVMInterface(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *, MoeDialect *dialect) { dialect->addInterfaces<MoeToLLVMInterface>(); });
}
