//===- CompactLowering.cpp - moe.compact: the live entries of a range, in order ---===//
//
// BodyEmitter's lists: a moe.compact becomes a loop that appends the live indices to a stack array (CPU,
// Ascend), or, on the GPU, a warp-wide ballot that places 32 indices at a time in the warp's part of a
// shared-memory buffer.
//===----------------------------------------------------------------------===//
#include "BodyEmitter.h"

namespace moec::moe {

void BodyEmitter::emitCompact(CompactOp compact) {
  if (onGpu)
    return emitWarpCompact(compact);
  Location loc = compact.getLoc();
  OpBuilder entry = atFunctionEntry();
  Value list = memref::AllocaOp::create(entry, loc, cast<MemRefType>(compact.getList().getType()));
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value bound = get(compact.getBound(), false);
  auto loop = scf::ForOp::create(b, loc, cst(0), bound, cst(1), ValueRange{cst(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Block &predicate = compact.getPredicate().front();
    Value k = loop.getInductionVar(), end = loop.getRegionIterArgs()[0];
    scalars.map(predicate.getArgument(0), k);
    Value live = emitBlock(predicate, false);
    memref::StoreOp::create(b, loc, arith::IndexCastOp::create(b, loc, b.getI32Type(), k), list, ValueRange{end});
    Value next = arith::AddIOp::create(b, loc, end, cst(1));
    scf::YieldOp::create(b, loc, ValueRange{arith::SelectOp::create(b, loc, live, next, end)});
  }
  scalars.map(compact.getList(), list);
  scalars.map(compact.getCount(), loop.getResult(0));
  pendingUnrolls.push_back(loop);
}

void BodyEmitter::emitWarpCompact(CompactOp compact) {
  Location loc = compact.getLoc();
  int64_t length = cast<MemRefType>(compact.getList().getType()).getDimSize(0);
  ScheduleAttr schedule = domain.schedule();
  int64_t warps = std::max<int64_t>(1, schedule.getThreads() * schedule.getRowsPerBlock() / 32);
  auto func = b.getInsertionBlock()->getParentOp()->getParentOfType<gpu::GPUFuncOp>();
  auto space = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value buffer = func.addWorkgroupAttribution(
      MemRefType::get({warps * length}, b.getI32Type(), MemRefLayoutAttrInterface(), space), loc);
  auto cst = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  auto i32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); };
  Value base = warpBase(loc, length);
  Value lane = arith::RemUIOp::create(b, loc, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x), cst(32));
  Value laneBit = arith::ShLIOp::create(b, loc, i32(1), arith::IndexCastOp::create(b, loc, b.getI32Type(), lane));
  Value lanesBelow = arith::SubIOp::create(b, loc, laneBit, i32(1));
  Value bound = get(compact.getBound(), false);
  auto loop = scf::ForOp::create(b, loc, cst(0), bound, cst(32), ValueRange{cst(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value k = arith::AddIOp::create(b, loc, loop.getInductionVar(), lane);
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, k, bound);
    auto tested = scf::IfOp::create(b, loc, b.getI1Type(), inside, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard branch(b);
      b.setInsertionPointToStart(tested.thenBlock());
      Block &predicate = compact.getPredicate().front();
      scalars.map(predicate.getArgument(0), k);
      scf::YieldOp::create(b, loc, ValueRange{emitBlock(predicate, false)});
      b.setInsertionPointToStart(tested.elseBlock());
      scf::YieldOp::create(b, loc, ValueRange{arith::ConstantIntOp::create(b, loc, 0, 1)});
    }
    Value live = tested.getResult(0);
    Value mask = NVVM::VoteSyncOp::create(b, loc, b.getI32Type(), i32(-1), live, NVVM::VoteSyncKind::ballot);
    Value end = loop.getRegionIterArgs()[0];
    auto count = [&](Value bits) {
      return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), math::CtPopOp::create(b, loc, bits));
    };
    Value place = arith::AddIOp::create(b, loc, end, count(arith::AndIOp::create(b, loc, mask, lanesBelow)));
    auto store = scf::IfOp::create(b, loc, live, /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard branch(b);
      b.setInsertionPointToStart(store.thenBlock());
      memref::StoreOp::create(b, loc, arith::IndexCastOp::create(b, loc, b.getI32Type(), k), buffer,
                              ValueRange{arith::AddIOp::create(b, loc, base, place)});
    }
    scf::YieldOp::create(b, loc, ValueRange{arith::AddIOp::create(b, loc, end, count(mask))});
  }
  NVVM::SyncWarpOp::create(b, loc, i32(-1));
  sharedLists[compact.getList()] = {buffer, base};
  scalars.map(compact.getCount(), loop.getResult(0));
}

void BodyEmitter::emitSharedListLoad(memref::LoadOp load) {
  auto [buffer, base] = sharedLists.lookup(load.getMemRef());
  Value at = arith::AddIOp::create(b, load.getLoc(), base, get(load.getIndices()[0], false));
  map(load.getResult(), memref::LoadOp::create(b, load.getLoc(), buffer, ValueRange{at}).getResult());
}

} // namespace moec::moe
