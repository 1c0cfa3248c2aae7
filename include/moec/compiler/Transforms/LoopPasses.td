//===- LoopPasses.td - loop-level passes -------------------*- tablegen -*-===//
//
// The CPU's lowering of domains to scf/vector loops, and the passes on the loops it and the GPU's lowering
// emit (versions of a row's loops, prefetches of gathered rows).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOOP_PASSES_TD
#define MOE_LOOP_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeLowerToLoops : Pass<"moe-lower-to-loops", "::mlir::ModuleOp"> {
  let summary = "CPU: lowers moe.compute to a row loop over a range and a vector loop along the row";
  let description = [{
    For the CPU target. Each kernel function gains two trailing `index` arguments, the row range
    [row_begin, row_end) that one thread computes, so the runtime can split rows across a thread pool.
    Every `moe.compute` becomes

    ```mlir
    scf.for %row = %row_begin to %row_end {                 // rows: all dims but the last, flattened
      scf.for %h = 0 to H_main step V { vector body }       // vector<V x T> loads and stores
      scf.for %h = H_main to H { scalar body }             // the remainder, when V does not divide H
    }
    ```
    and every `moe.sum` an `scf.for` with an f32 (or vector of f32) accumulator, unrolled per the schedule.
    Values that do not depend on the contiguous index stay scalar and are computed once per vector.
    The vector stores of the output are marked `moe.streamable` with the alignment they have where the
    output's base pointer is aligned (moe-streaming-stores, next, decides whether they stream).
    A row whose reduction moe-accumulate-rows marked `moe.accumulated_row` (a reduction over gathered rows
    too long to unroll fully: C2's combine over its list of live experts) runs the reduction's steps over the whole row
    into f32 accumulators on the stack, several steps per pass, each element still adding its terms in
    order (bit-identical results). A row whose bound turns out to be 1 to 8 at run time (C2's K live
    experts of E) skips the accumulators: each step's row-invariant work runs once per row (step j past
    the bound redoes the last live one's, so it reads only what that one reads) and each vector adds its
    live steps' terms in registers, in step order, each step past the first under a `j < bound` branch
    that is the same for the whole row (C2 at DeepSeek-V3's and Qwen3's shapes: 0.62-0.65 of a memcpy
    through the accumulators, 0.71-0.76 without).

    A domain whose points each run a dot product along a contiguous dim and that does not vectorize along
    its last dim (A3's probs_grad[t, e] = sum(j < H) ...) runs by point instead: the range is of points
    (all dims flattened), and the runtime splits points, not rows, over threads. In a domain marked
    `moe.interleaved_points = N` (moe-interleave-reductions) a point whose dot product runs (the condition
    around it holds) waits in one of N slots; N waiting points run their dot products together in one loop
    along j, so N gathered rows stream at once, each point's partial sums adding the same terms in the same
    order. A `moe.compact` marked `moe.compress_lanes = N` (moe-compress-lists) tests N entries a step.

    ```mlir
    %n = scf.for %p = %begin to %end iter_args(%pending = %c0) {
      ... the point's ops before the sum; scf.if %live { save them in slot %pending; when N are saved:
          scf.for %j = 0 to H step 32 { N x vector<32 x f32> partial sums } and each point's write }
      else { the point's write now }
    }
    scf.for %q = 0 to %n { the points left waiting, one at a time }
    ```
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect",
                           "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect", "::mlir::math::MathDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def MoeStreamingStores : Pass<"moe-streaming-stores", "::mlir::ModuleOp"> {
  let summary = "CPU: non-temporal vector stores of a large output, where its base pointer is aligned";
  let description = [{
    Runs on the loops (after moe-lower-to-loops). A kernel writes each output once and never reads it back.
    A cached store of a line first reads it (the read for ownership); a non-temporal store does not, as
    memcpy's large copies do not. It pays only for an output larger than the caches (from 4 MiB on: one that
    fits is better written through them, where its reader finds it), and x86 has no unaligned non-temporal
    store (LLVM splits one into 8-byte pieces).

    So each vector store marked `moe.streamable = N` (moe-lower-to-loops: N is the alignment the store has
    where the output's base pointer is N-aligned) branches on one condition per output and alignment,
    computed where the output is defined, once per kernel call: the base pointer is N-aligned and the output
    holds at least 4 MiB. Where it holds the store is non-temporal and N-aligned; elsewhere it stays as it
    was. A branch the same way every time costs next to nothing; a second copy of the loop would double the
    code. Results do not change. On by default; `--disable streaming-stores`, or `off=streaming-stores` in
    `moec tune`'s CPU space.

    ```mlir
    %out = moe.view %arg2 : !llvm.ptr -> memref<?x4096xbf16>
    ...
        vector.store %v, %out[%row, %h] {alignment = 2 : i64, moe.streamable = 64 : i64}
            : memref<?x4096xbf16>, vector<32xbf16>
    // becomes
    %out = moe.view %arg2 : !llvm.ptr -> memref<?x4096xbf16>
    %base = memref.extract_aligned_pointer_as_index %out : memref<?x4096xbf16> -> index
    %aligned = arith.cmpi eq, (%base % 64), 0 : index
    %large = arith.cmpi uge, (dim 0 * 4096), 2097152 : index     // 4 MiB of bf16
    %stream = arith.andi %aligned, %large : i1
    ...
        scf.if %stream {
          vector.store %v, %out[%row, %h] {alignment = 64 : i64, nontemporal = true} : ...
        } else {
          vector.store %v, %out[%row, %h] {alignment = 2 : i64} : ...
        }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"];
}

def MoeVersionRowLoops : Pass<"moe-version-row-loops", "::mlir::ModuleOp"> {
  let summary = "A loop along a row in a version without the branches its row decides";
  let description = [{
    Runs on the loops (after moe-lower-to-loops or moe-lower-to-gpu). A branch inside an innermost loop
    whose condition does not change along the loop (after loop-invariant code motion; the loads of
    read-only tensors at the top of the loop's body, at indices from outside it, move out too, under a
    branch that skips the loop when it would not run, and so do the pure ops of its branches that depend
    on nothing in the loop) and that has a usual side is assumed to take it:
    - a branch whose other side reports an error (writes the status buffer): a gathered row's bounds check;
    - a branch whose one side moves data (reads or writes memory) and whose other only passes values on
      or is absent: a compacted fold's `count > k`, "term k is live"; a point's `row >= 0`, "its row is
      written".
    The loop then runs in versions chosen once per row: copies with each such condition replaced by a
    constant, where the conditions hold, and the original loop otherwise. The canonicalizer folds the
    copies' branches away. Results do not change.
    - Conditions that compare one value with constants (`count > 1`, `count > 2`, ...: a compacted fold's
      live count) select: a copy per value of it (`scf.index_switch`, the value clamped to where the
      comparisons still change), each with exactly its live terms. Only with `select-versions`: on the
      GPU a switch becomes an indirect branch, so there each condition takes its usual value instead.
    - Every other condition takes its usual value, unless a branch around it is on its skipped side for
      the row (a dead term's bounds check does not matter).
    - Without `select-versions` (the GPU), where the conditions are both checks and terms that may be
      skipped, a row whose checks hold but some of whose terms are skipped (B2 past active_num, C2's
      unrouted experts) runs a second copy: only the checks take their usual values there, and the terms'
      branches stay, for moe-guard-loads to make branch-free.
    - Without `select-versions`, where the test of the checks is exact (false only where a check that runs
      fails: each check's branch is inside no branch of the loop but guards whose conditions exempt it, or
      its condition is a step table's vote marked `moe.exact_check_vote`), the original loop runs only for
      rows that failed a check, and keeps only its status writes: it reports, the outputs incomplete as the
      error says. Its loads, arithmetic and stores would hold registers that the whole kernel pays for in
      occupancy (C2 at Mixtral's shape without mixed precision: 72 registers with them, 32 without).
    - A loop that holds an op the threads of a warp or block run together (an NVVM vote, shuffle or warp
      barrier, `gpu.barrier`) is left alone: its copies, chosen by a condition that may differ between lanes
      (`lane == 0`), would each run that op on only some of the lanes.
    Example, with one `count` comparison (so no selector):

    ```mlir
    scf.for %h = %c0 to %c64 step %c16 {
      %live = arith.cmpi ugt, %count, %c1 : index
      %sum = scf.if %live -> (vector<16xf32>) {
        %x = scf.if %inside -> (vector<16xf32>) {
          %v = vector.load %x[%row, %h] : memref<?x64xf32>, vector<16xf32>
          scf.yield %v : vector<16xf32>
        } else {
          memref.store %c1_i64, %status[%c0] : memref<2xi64>   // the error, reported
          scf.yield %zero : vector<16xf32>
        }
        scf.yield %x : vector<16xf32>
      } else {
        scf.yield %zero : vector<16xf32>
      }
      vector.store %sum, %out[%n, %h] : memref<?x64xf32>, vector<16xf32>
    }
    ```

    becomes, after `--canonicalize`:

    ```mlir
    %live = arith.cmpi ugt, %count, %c1 : index
    %usual = arith.andi %live, %inside : i1
    scf.if %usual {
      scf.for %h = %c0 to %c64 step %c16 {
        %v = vector.load %x[%row, %h] : memref<?x64xf32>, vector<16xf32>
        vector.store %v, %out[%n, %h] : memref<?x64xf32>, vector<16xf32>
      }
    } else {
      scf.for %h = ... { ... the loop above, unchanged ... }
    }
    ```
  }];
  let options = [
    Option<"selectVersions", "select-versions", "bool", "true",
           "a version per value of a compared count (scf.index_switch); else the usual values only">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
}

def MoePrefetchGatheredRows : Pass<"moe-prefetch-gathered-rows", "::mlir::ModuleOp"> {
  let summary = "CPU: software prefetch of the rows that loops along a row gather";
  let description = [{
    Runs on the loops (after moe-lower-to-loops). A loop along a row that reads a row chosen by data
    (`x[idx[n * K + k], h]`: a vector load whose last index is the loop's, the others computed from a load)
    stalls at each new row and each 4 KiB page of it: the hardware prefetchers learn a stream only after a
    few misses. On one thread of a 2-core EPYC the best hand-written B2 loop over rows in random order read
    at 0.5 of a same-run memcpy without software prefetch and 0.7 with both of these:

    1. Each gathered vector load also prefetches its row 768 bytes further on, clamped to the row's last
       element.
    2. Where the loop along the row runs in the loop over rows (under `scf.if`s at most), and the gathered
       row's indices are computed from the row index only, by pure ops and loads of tensors the function
       never writes, at the top of the two loops' bodies (so every row computes them), the next row's
       indices are computed ahead, before the loop along this row, when the next row is in this thread's
       range. Each load they take is clamped into its tensor (and yields 0 when the tensor is empty); when
       the row index lies inside the gathered tensor (-1, no row, prefetches nothing), the row's first
       768 bytes are prefetched, a cache line at a time.

    Whether the prefetches pay depends on the machine as much as on the rows. Where the hardware already
    streams the rows (B2 and C2 at Mixtral's 8 experts read each expert's rows in order, 8 streams), a
    2-core EPYC lost half of C2's speed to them (0.61 of a memcpy against 1.1) and a 2-core Xeon gained a
    third (0.92 against 1.27). So each loop along a row is versioned, with and without its prefetches, and
    measures which copy is faster as it runs: at the start of every 1024 rows the loop runs, 8 rows
    alternate the two copies and add up their cycles (`llvm.readcyclecounter`, read by these rows only, in
    a stack array of the function per loop: rows run, cycles without, cycles with); the next rows run the
    copy that took fewer. A row of B2 at DeepSeek-V3 takes some 20000 cycles, far above the counter's cost
    (22 ns a read in a VM). A table of the 64
    recently gathered rows of each tensor (a stack array, indexed by the low bits of a row's linear
    number) records each row whose indices are known before its loop (computed around it, or by (2)'s
    slice); a next row that is streamed (the row before it is recent) or recent itself (read again: in
    cache) is not prefetched. It runs after moe-version-row-loops and a canonicalization, so that each
    version's loop measures only its own rows. On by default; `--disable prefetch-gathered-rows`, or
    `off=prefetch-gathered-rows` in `moec tune`'s CPU space.

    Prefetches change no result. Every address they compute lies inside its tensor, and every table
    slot inside the table.

    ```mlir
    scf.for %n = %begin to %end step %c1 {
      scf.for %h = %c0 to %c4096 step %c16 {
        %i = memref.load %idx[%n] : memref<?xi32>
        %r = arith.index_cast %i : i32 to index
        %v = vector.load %x[%r, %h] : memref<?x4096xbf16>, vector<16xbf16>
        ...
    // becomes
    %state = memref.alloca() : memref<3xindex>                  // rows run, cycles without, with: 0
    %recent = memref.alloca() : memref<64xindex>                // filled with -2
    scf.for %n = %begin to %end step %c1 {
      %r0 = index_cast(memref.load %idx[clamped %n])            // this row's index
      memref.store %r0, %recent[%r0 & 63]
      %next = arith.addi %n, %c1 : index
      scf.if (%next < %end) {
        %r1 = index_cast(memref.load %idx[clamped %next])       // the next row's index
        scf.if (%r1 in x && %recent[(%r1 - 1) & 63] != %r1 - 1 && %recent[%r1 & 63] != %r1) {
          memref.prefetch %x[%r1, %c0], read, locality<3>, data   // %c32, ... to 768 B
        }
      }
      %phase = %state[0] & 1023
      scf.if (%phase == 0) { %state[1] = 0; %state[2] = 0 }
      %plain = %phase < 8 ? (%phase & 1) == 0 : %state[1] < %state[2]
      %t0 = %phase < 8 ? llvm.call_intrinsic "llvm.readcyclecounter"() : () -> i64 : 0
      scf.if (%plain) {
        scf.for %h = %c0 to %c4096 step %c16 { ... }            // as it was
      } else {
        scf.for %h = %c0 to %c4096 step %c16 {
          ...
          memref.prefetch %x[%r, min(%h + 384, 4095)], read, locality<3>, data
          %v = vector.load %x[%r, %h] ...
        }
      }
      scf.if (%phase < 8) { %state[%plain ? 1 : 2] += readcyclecounter - %t0 }
      %state[0] = %state[0] + 1
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

#endif // MOE_LOOP_PASSES_TD
