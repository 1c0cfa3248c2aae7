//===- UnrollBudgets.h - How far loops are unrolled (private to Transforms) ---===//
//
// The budgets of the unrollings: BodyEmitter's of reductions, moe-unroll-lane-sums' of a GPU warp's split sum
// along a row (UnrollLaneSums.cpp), and moe-unroll-row-loops' of a GPU thread's loop along a row
// (UnrollRowLoops.cpp).
//===----------------------------------------------------------------------===//
#ifndef MOEC_COMPILER_TRANSFORMS_UNROLLBUDGETS_H
#define MOEC_COMPILER_TRANSFORMS_UNROLLBUDGETS_H

#include <cstdint>

namespace moec::moe {

/// The most ops an unrolled loop's body may hold (the unrolled body's ops).
constexpr int64_t kMaxUnrolledOps = 4096;

/// GPU, a dot product's loop along the row (moe-unroll-lane-sums): 32 vector loads of 16 bytes
/// per lane, 128 registers of data in flight: a batch of 2 points (2 rows and the row they share, 3 loads a
/// step) takes 8 steps at once, 96 registers, fewer than the batch of 8 that sets the kernel's count (A3 probs
/// at Mixtral, 1024 tokens: 85.8 % of copy in the emulator's bound with 4 steps, 88.4 % with 8). A step of more
/// loads than kMaxUnrolledStepLoads (the batch of 8, 9 loads) stays as it is: its registers already set the
/// count (unrolled by 2, ptxas spilled 84 bytes at DeepSeek-V3).
constexpr int64_t kDotProductLoadsInFlight = 32, kMaxUnrolledStepLoads = 4;

/// GPU, a loop along a row that moe-unroll-row-loops unrolls: vector loads per lane in one unrolled step, at
/// most 32 registers of loaded data, so that the unroll does not cost the kernel its warps per SM. B2 with
/// active_num at Qwen3 (8 gathers a step) unrolled by 2 took 16: its registers then allowed 24 warps per SM
/// instead of 32, and its bound fell from 85.5 to 83.8 % of copy. (A dot product's loop takes 32,
/// kDotProductLoadsInFlight: its kernels run 8 warps per SM anyway.)
constexpr int64_t kRowLoopLoadsInFlight = 8;

} // namespace moec::moe

#endif // MOEC_COMPILER_TRANSFORMS_UNROLLBUDGETS_H
