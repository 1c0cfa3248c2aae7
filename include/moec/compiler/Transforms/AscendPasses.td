//===- AscendPasses.td - Ascend passes ---------------------*- tablegen -*-===//
//
// Ascend's passes: the plan of each domain's tiles and UB buffers, and the lowering that follows it.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_ASCEND_PASSES_TD
#define MOE_ASCEND_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoePlanAscend : Pass<"moe-plan-ascend", "::mlir::ModuleOp"> {
  let summary = "Derives each domain's Ascend tiling (UB buffers, row chunks, copies) for one chip";
  let description = [{
    For every scheduled `moe.compute` / `moe.scatter`, reads off the IR what an Ascend vector core must
    hold in its Unified Buffer to run one row: a buffer per tensor read along the row (`in.<tensor>`,
    double-buffered; its rows are consecutive in GM when the load indexes the domain's own row, else each
    gathered row is its own DataCopy, as many per row as the enclosing folds' constant bounds), one per
    output (`out.<tensor>`), f32 working buffers for a reduction and for casts, and the row-invariant
    values (`idx.<tensor>`: indices and probs, copied once per pass). It then picks the largest chunk of
    the row that fits the UB with 32-byte aligned buffers (balanced: 7168 elements in two passes are two
    chunks of 3584, not 4096 + 3072), double buffering unless single buffers, holding longer chunks, make
    a row cheaper under the chip's cost model (a row's DataCopy set-ups and bytes overlap when
    double-buffered, add up when not), and how many short rows share a pass. The result is a
    `#moe.ascend_plan` on the op; nothing else changes. A domain that reduces along a contiguous dim (a dot
    product over H) plans its points as rows. An input kept across the rows that share its GM row holds its
    whole row (`wholeRow`) when the row needs several chunks and the other buffers still need no more.

    Before (B2, f32, H = 8):
    ```mlir
    moe.compute %out[%n, %c8] {schedule = #moe.schedule<...>} : memref<?x8xf32> { ... }
    ```
    After (`moe-plan-ascend{chip=910b ub-bytes=65536}`):
    ```mlir
    moe.compute %out[%n, %c8] {ascend_plan = #moe.ascend_plan<chip = "910b", rowLength = 8, chunk = 8,
        chunks = 1, bufferCount = 2, maxRowsPerPass = ..., ...>, schedule = #moe.schedule<...>} ...
    ```
    A row whose smallest chunk does not fit the UB is an error naming the op and the bytes it needs.
    Autotuning's Ascend knobs override the choices: `buffer-count`, `max-chunk` (rounded down to the
    granule, never below one) and `max-rows-per-pass`.
  }];
  let options = [
    Option<"chip", "chip", "std::string", "\"chip\"", "the chip's name, recorded in the plan">,
    Option<"ubBytes", "ub-bytes", "int64_t", "196352", "usable UB bytes per vector core">,
    Option<"ubAlignment", "ub-alignment", "int64_t", "32", "UB buffer alignment in bytes (a power of two)">,
    Option<"maxCopyBytes", "max-copy-bytes", "int64_t", "65536", "the most bytes one buffer of a chunk holds">,
    Option<"bufferCount", "buffer-count", "int64_t", "0",
           "1: single buffers, a narrow input cast in place; 2: double-buffered queues; 0: the cheaper row "
           "under data-copy-ns and gm-gbps-per-core (without them: the fewer chunks)">,
    Option<"maxChunk", "max-chunk", "int64_t", "0", "the most elements of a row per UB pass (0: what fits)">,
    Option<"maxRowsPerPass", "max-rows-per-pass", "int64_t", "0", "the most rows that share a UB pass (0: what fits)">,
    Option<"dataCopyNs", "data-copy-ns", "double", "0", "the chip's set-up time of one DataCopy (cost model)">,
    Option<"gmGbpsPerCore", "gm-gbps-per-core", "double", "0", "the chip's GM bandwidth per vector core (cost model)">
  ];
}

def MoeLowerToAscend : Pass<"moe-lower-to-ascend", "::mlir::ModuleOp"> {
  let summary = "Ascend: each planned domain as a per-core loop nest through UB buffers";
  let description = [{
    For the Ascend target, after `moe-plan-ascend`. Each kernel gains three trailing arguments: its core's
    runtime (`ascend:runtime`: the simulator's hook table on the CPU), the core's index (`ascend:core`)
    and the number of cores launched (`ascend:cores`, the plan's blockDim). Every `moe.compute` /
    `moe.scatter` with a `#moe.ascend_plan` becomes

    ```mlir
    %raw = moe.ub_alloc %rt, %core "in.x" at 0 : memref<28672xi8, #moe.ub>     // the plan's buffers
    %in = memref.view %raw[%c0][] : memref<28672xi8, #moe.ub> to memref<2x7168xbf16, #moe.ub>
    scf.for %row = %begin to %end {          // the core's rows: the first rows % cores cores take one more
      <row prologue: indices, conditions>    // scalar reads
      scf.for %c = 0 to chunks {             // the row, a chunk at a time
        moe.data_copy %rt, %core, %x[%r, %off] to %in[%slot, %c0], %len   // copy-in, under its conditions
        scf.for %h = %off to %off + %len step V { vector body over UB }     // compute
        moe.data_copy %rt, %core, %out[%c0, %c0] to %y[%row, %off], %len  // copy-out
      }
      moe.row_done %rt, %core, %row
    }
    moe.ub_free %rt, %core "in.x"
    ```
    A reduction over gathered rows (B2's sum over the top-k, C2's combine) runs step by step over the
    chunk into the f32 accumulators (`acc.f32`), one gathered row in the UB per step, each element adding
    its terms in order: the results are bit-identical to the CPU kernels. In the plan's in-place layout the
    output is staged in the accumulators' bytes. Loads that do not run along the
    row (indices, probs) stay scalar reads of global memory.
  }];
  let options = [
    Option<"ubAlignment", "ub-alignment", "int64_t", "32", "UB buffer alignment in bytes (the chip's)">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect",
                           "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect"];
}

#endif // MOE_ASCEND_PASSES_TD
