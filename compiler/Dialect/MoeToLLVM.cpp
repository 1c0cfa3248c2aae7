//===- MoeToLLVM.cpp - Lowers moe.view to a memref descriptor -------------===//
//
// moe.view is the only moe op that reaches the LLVM conversion (compute and sum are lowered to loops
// before). It is lowered through the ConvertToLLVMPatternInterface, so both upstream `convert-to-llvm`
// (CPU) and `convert-gpu-to-nvvm` (GPU) pick it up without a pass of our own.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Dialect/MoeDialect.h"

#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"
#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"

using namespace mlir;
using namespace moec::moe;

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

struct MoeToLLVMInterface : ConvertToLLVMPatternInterface {
  using ConvertToLLVMPatternInterface::ConvertToLLVMPatternInterface;
  void populateConvertToLLVMConversionPatterns(ConversionTarget &, LLVMTypeConverter &converter,
                                               RewritePatternSet &patterns) const final {
    patterns.add<ViewOpLowering>(converter);
  }
};
} // namespace

void moec::moe::registerConvertMoeToLLVMInterface(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *, MoeDialect *dialect) { dialect->addInterfaces<MoeToLLVMInterface>(); });
}
