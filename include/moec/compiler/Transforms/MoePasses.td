//===- MoePasses.td - moe-level passes ---------------------*- tablegen -*-===//
//
// The passes on the moe dialect, before any loop exists: those that run for every target (specialization,
// fills, schedules, compacted folds, row invariants) and the CPU's own (folds widened from rounded types,
// compacted points, prefix folds carried from row to row).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_MOE_PASSES_TD
#define MOE_MOE_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeSpecialize : Pass<"moe-specialize", "::mlir::ModuleOp"> {
  let summary = "Binds static dims and attributes to constants and folds them";
  let description = [{
    Replaces every `moe.param "NAME"` by the constant given as `bind=NAME=VALUE`, then folds: constant
    sizes become static memref dims (so strides are compile-time constants), and mode conditions such as
    `drop_pad_mode == 1` disappear. A `moe.param` without a binding is an error.

    Before (`bind=H=7168,drop_pad_mode=0`):
    ```mlir
    %H = moe.param "H" : index
    %m = moe.param "drop_pad_mode" : index
    %g = moe.view %arg0[%R, %H] : !llvm.ptr -> memref<?x?xbf16>
    ```
    After:
    ```mlir
    %g = moe.view %arg0[%R, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
    ```
  }];
  let options = [
    ListOption<"bindings", "bind", "std::string", "NAME=VALUE for each static dim and attribute">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect"];
}

def MoeFillUncoveredRows : Pass<"moe-fill-uncovered-rows", "::mlir::ModuleOp"> {
  let summary = "Writes an output's fill only to the rows that later scatters leave unwritten";
  let description = [{
    An op that fills an output (`out[r, h] = 0`) and then scatters whole rows into it writes most rows
    twice. When a kernel computes all of an output from read-only inputs, and later kernels write that
    output only through `moe.scatter`s of whole rows (row indices and guard independent of the contiguous
    index), this pass gives every kernel a `workspace` pointer (after the last pointer argument; the
    runtime passes a zeroed buffer with one byte per row of each such output, at 64-byte aligned offsets,
    in the order of the module's `moe.workspace` attribute), has each scatter set its rows' bytes, and
    moves the fill after the scatters as a scatter guarded by "this row's byte is 0". Results do not change.

    ```mlir
    func.func @fill(...) {
      moe.compute %out[%R, %c64] : memref<?x64xbf16> { ^bb0(%r: index, %h: index): moe.yield %zero : bf16 }
    }
    func.func @scatter(...) {
      moe.scatter %out[%Tk, %K, %c64] : memref<?x64xbf16> { ...; moe.write %v to [%row, %h] if %live : bf16 }
    }
    // becomes
    func.func @scatter(..., %ws: !llvm.ptr {moe.arg = #moe.arg<workspace>}, ...) {
      %covered = moe.view %ws_at_0[%R] : !llvm.ptr -> memref<?xi8>
      moe.scatter %out[%Tk, %K, %c64] ... {
        ...
        scf.if %live_and_inside { memref.store %c1_i8, %covered[%row] : memref<?xi8> }
        moe.write %v to [%row, %h] if %live : bf16
      }
    }
    func.func @fill(..., %ws: !llvm.ptr {moe.arg = #moe.arg<workspace>}, ...) {
      moe.scatter %out[%R, %c64] ... {
      ^bb0(%r: index, %h: index):
        %m = memref.load %covered[%r] : memref<?xi8>
        %unwritten = arith.cmpi eq, %m, %c0_i8 : i8
        moe.write %zero to [%r, %h] if %unwritten : bf16
      }
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect", "::mlir::LLVM::LLVMDialect"];
}

def MoeSchedule : Pass<"moe-schedule", "::mlir::ModuleOp"> {
  let summary = "Chooses how each moe.compute runs and records it as #moe.schedule";
  let description = [{
    Attaches a `#moe.schedule` to every `moe.compute` that has none. Options left at 0 are the compiler's
    choice (moec::chooseSchedule): a vector width of 16 bytes (on the CPU, one register of elements:
    `cpu-lanes` f32 lanes, this machine's by default, twice as many for 16-bit types; on Ascend one
    register of f32 lanes) where the contiguous dim and the body allow it, threads to cover the contiguous
    dim once (a multiple of 32, at most 256), enough rows per block to reach 128 threads, and a reduction
    unroll of 8.

    ```mlir
    moe.compute %out[%N, %c7168] : memref<?x7168xbf16> {...}
    // becomes
    moe.compute %out[%N, %c7168] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 256, vector = 8, unroll = 8>} ...
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"gpu\"", "cpu, gpu or ascend">,
    Option<"vector", "vector", "int64_t", "0", "vector width (0: compiler's choice)">,
    Option<"threads", "threads", "int64_t", "0", "GPU threads along the contiguous dim (0: choice)">,
    Option<"rowsPerBlock", "rows-per-block", "int64_t", "0", "GPU rows per block (0: choice)">,
    Option<"unroll", "unroll", "int64_t", "0", "moe.sum unroll factor (0: choice)">,
    Option<"cpuLanes", "cpu-lanes", "int64_t", "0",
           "CPU: f32 lanes of the widest vector register (0: this machine's, moec::hostVectorLanes)">
  ];
}

def MoeWidenRoundedFolds : Pass<"moe-widen-rounded-folds", "::mlir::ModuleOp"> {
  let summary = "CPU: a fold that accumulates in f16 or bf16 carries its accumulator as f32";
  let description = [{
    A fold whose accumulator is f16 or bf16 and widened to f32 in its step (C2 without mixed precision:
    `T(f32(acc) + f32(x))`, rounded after every add) carries it as f32 instead, always holding the exact
    value of the T one. The step's `f32(acc)` becomes the accumulator itself, its yielded `T(y)`
    becomes `f32(T(y))`, widened through the branches that yield it, and the fold's result is rounded once,
    after it. On x86 the rounding then stays in f32 registers (an integer add and a mask) instead of a
    pack, an unpack and a masked load of the NaN pattern in every step's dependency chain; the fold's
    steps are also term additions that moe-lower-to-loops can add directly or through accumulated rows.
    Every value is the same, so every result is.

    Before:
    ```mlir
    %r = moe.fold %n, %zero : bf16 {
    ^bb0(%i: index, %acc: bf16):
      %a = arith.extf %acc : bf16 to f32
      %s = arith.addf %a, %x : f32
      %t = arith.truncf %s : f32 to bf16
      moe.yield %t : bf16
    }
    ```
    After:
    ```mlir
    %w = moe.fold %n, %zero32 : f32 {
    ^bb0(%i: index, %acc: f32):
      %s = arith.addf %acc, %x : f32
      %t = arith.truncf %s : f32 to bf16
      %e = arith.extf %t : bf16 to f32
      moe.yield %e : f32
    }
    %r = arith.truncf %w : f32 to bf16
    ```

    With `unchecked-roundings` (bf16 only), a step's rounding of the sum of two bf16 values (the
    accumulator and a widened bf16 term) whose rounded value goes only to the accumulator is marked
    `moe.nan_unchecked`: moe-expand-unchecked-roundings rounds it without the NaN case, since a NaN there
    stays a NaN and the fold's result is rounded with it (see that pass).
  }];
  let options = [
    Option<"uncheckedRoundings", "unchecked-roundings", "bool", /*default=*/"false",
           "mark the step roundings whose NaN case the result's rounding covers (moe.nan_unchecked)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
}

def MoeCompactPredicatedFolds : Pass<"moe-compact-predicated-folds", "::mlir::ModuleOp"> {
  let summary = "Splits a fold whose steps are mostly no-ops into a list of the live steps and a fold over it";
  let description = [{
    A `moe.fold` inside a domain that runs along the row (its result depends on the contiguous index),
    has a constant bound longer than the schedule's unroll factor (shorter ones unroll fully and keep
    their well-predicted branches; moe-short-lists compacts some of those), and whose step is `p ? acc : f(acc)` with `p` independent of the accumulator
    and of the contiguous index, becomes a `moe.compact` of the steps where `f` applies and a fold over
    that list, in the same order (results are bit-identical). With `moe-hoist-row-invariants` after it,
    the list is built once per row and every vector along the row does only the live steps: C2 then does
    K gathers per vector instead of E tests. A `moe.sum` whose term is `p ? 0.0 : f` is split the same
    way (its accumulator starts at +0.0, so it is never -0.0 and adding +0.0 changes nothing): B2's
    dropped or inactive rows cost no branch per vector. On the GPU (`target=gpu`) each warp keeps its list in shared
    memory, so only domains lowered a row at a time qualify, and the bound must fit; where a block's warps
    all run one row (C2 at 256 threads), the block builds one list, each warp testing every W-th run of 32
    steps, with two block barriers (the row's index loads once per block, not once per warp). The lists of
    a domain share 16 KiB (CPU stack, or GPU shared memory per block), which lists it already has count
    against (lit: `compact-predicated-folds-budget.mlir`).

    Before:
    ```mlir
    %acc = moe.fold %c256, %cst : f32 {
    ^bb0(%e: index, %a: f32):
      %r = memref.load %rowmap[%t, %e] : memref<?x256xi32>
      %dead = arith.cmpi slt, %r, %c0_i32 : i32
      %next = scf.if %dead -> (f32) { scf.yield %a : f32 } else { ...; scf.yield %sum : f32 }
      moe.yield %next : f32
    }
    ```
    After:
    ```mlir
    %list, %n = moe.compact %c256 : memref<256xi32> {
    ^bb0(%e: index):
      %r = memref.load %rowmap[%t, %e] : memref<?x256xi32>
      %dead = arith.cmpi slt, %r, %c0_i32 : i32
      %live = arith.xori %dead, %true : i1
      moe.yield %live : i1
    }
    %acc = moe.fold %n, %cst : f32 {
    ^bb0(%i: index, %a: f32):
      %e = ... memref.load %list[%i] ...
      %r = memref.load %rowmap[%t, %e] : memref<?x256xi32>
      ...
      moe.yield %sum : f32
    }
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"", "cpu or gpu">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect"];
}

def MoeShortLists : Pass<"moe-short-lists", "::mlir::ModuleOp"> {
  let summary = "A fold short enough to unroll, whose live steps add terms, over a list of its live steps";
  let description = [{
    moe-compact-predicated-folds leaves a predicated fold of at most the schedule's unroll factor's steps
    alone: unrolled fully, its branches are the same for every vector of a row and its loads issue at once.
    Where its live steps add terms, this pass splits it the same way all the same (a `moe.compact` of the
    live steps and a fold over that list, in the same order: bit-identical results), because the loop
    lowerings then run the live steps without a test per step and vector:
    - CPU (the pipeline runs it unless accumulate-rows is off): a fold or sum whose live steps add f32
      terms (an f32 accumulator, or a fold that moe-widen-rounded-folds carries in f32); moe-lower-to-loops
      adds a short list's live steps directly in registers (C2 at Mixtral's top-2 of 8: 0.82 -> 1.06-1.14
      of a memcpy; B2 with inactive rows). lit: `compact-predicated-folds.mlir` (SHORT-ON),
      `widen-rounded-folds.mlir`.
    - GPU (`target=gpu`): folds only, whose live steps add terms in T or f32, where moe-hoist-row-invariants
      runs; moe-lower-to-gpu runs the row in a version per power of two of live steps, each fold step
      reading its step table (a short sum's steps would redo their row-invariant work for every vector:
      B2's top-8 stays as it is). lit: `lower-to-gpu-short-lists.mlir`.
    The lists share their domain's budget with moe-compact-predicated-folds' (16 KiB). `--disable
    short-lists` leaves short folds with their branches.

    ```mlir
    %acc = moe.fold %c8, %cst : f32 {           // Mixtral: 8 experts, 2 live per token
    ^bb0(%e: index, %a: f32):
      %r = memref.load %rowmap[%t, %e] : memref<?x8xi32>
      %dead = arith.cmpi slt, %r, %c0_i32 : i32
      %next = scf.if %dead -> (f32) { scf.yield %a : f32 } else { ...; %s = arith.addf %a, %x : f32; scf.yield %s : f32 }
      moe.yield %next : f32
    }
    // becomes
    %list, %n = moe.compact %c8 : memref<8xi32> { ^bb0(%e: index): ... moe.yield %live : i1 }
    %acc = moe.fold %n, %cst : f32 { ^bb0(%i: index, %a: f32): %e = ... %list[%i] ...; %s = arith.addf %a, %x : f32; moe.yield %s : f32 }
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"", "cpu or gpu">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect"];
}

def MoeHoistRowInvariants : Pass<"moe-hoist-row-invariants", "::mlir::ModuleOp"> {
  let summary = "Marks what each row of a domain computes once, outside the loop along the row";
  let description = [{
    A `moe.compute` / `moe.scatter` body runs per element, but most of it usually depends only on the
    row: index loads, folds over experts or slots that read no element of the row, divisions, predicates.
    This pass marks each top-level op of the body that neither depends on the contiguous (last) index nor
    contains anything that does `moe.row_invariant`, and a `moe.write` whose guard is such a value
    `moe.row_guard`. The loop lowerings compute marked ops once per row, before the loop along the row,
    and skip the row's loop when its guard is false. Results do not change.

    ```mlir
    moe.scatter %dy[%Tk, %K, %c64] : memref<?x64xbf16> {
    ^bb0(%t: index, %k: index, %h: index):
      %row = memref.load %idx[%t, %k] : memref<?x8xi32>            // marked: once per (t, k)
      %live = arith.cmpi sge, %row, %c0 : index                    // marked
      %v = memref.load %g[%t, %h] : memref<?x64xbf16>              // not: reads along h
      moe.write %v to [%row, %h] if %live {moe.row_guard} : bf16  // the row runs only if %live
    }
    ```
  }];
}

def MoeCompactPredicatedPoints : Pass<"moe-compact-predicated-points", "::mlir::ModuleOp"> {
  let summary = "CPU: a row of points runs only at its live points, listed once per row";
  let description = [{
    A point domain (a dot product per point, vector width 1) over (outer..., e < E), E a constant, whose
    body numbers its point by a prefix count `fold(j < e, 0) (p(j) ? n + 1 : n)`, and whose points where
    p(e) is false each write one constant c to their own element and do nothing else (decided on a clone
    of the body with p(e) set to false, canonicalized). A3 with probs: p is `routing_map[t, j] != 0`, and
    K of the E points of a token are live. This pass adds the row's list of live points at the top of the
    body (`moe.compact`, marked `moe.live_list`), marks the count `moe.live_rank` (at a live point, its
    position in that list) and the domain `moe.dead_value = c`. The CPU point lowering then stores c to
    each row's elements, builds the list once per row (AVX-512: 16 entries a step) and runs the body at
    the listed points only, the count read from the list position: the same values in every element.

    ```mlir
    moe.scatter %pg[%Tk, %c128] {schedule = #moe.schedule<... vector = 1 ...>} : memref<?x128xbf16> {
    ^bb0(%t: index, %e: index):
      %k = moe.fold %e, %c0 : index {
      ^bb0(%j: index, %n: index):
        %b = memref.load %map[%t, %j] : memref<?x128xi8>
        %p = arith.cmpi ne, %b, %c0_i8 : i8
        %next = arith.addi %n, %c1 : index
        %s = arith.select %p, %next, %n : index
        moe.yield %s : index
      }
      ...   // p(e) false: row = -1, probs_grad[t, e] = 0
    }
    // becomes
    moe.scatter %pg[%Tk, %c128] {moe.dead_value = 0.0 : bf16, ...} {
    ^bb0(%t: index, %e: index):
      %list, %n = moe.compact %c128 {moe.live_list} : memref<128xi32> {
      ^bb0(%j: index):
        %b = memref.load %map[%t, %j] : memref<?x128xi8>
        %p = arith.cmpi ne, %b, %c0_i8 : i8
        moe.yield %p : i1
      }
      %k = moe.fold %e, %c0 {moe.live_rank} : index { ... }
      ...
    }
    ```
  }];
}

def MoeCarryPrefixFolds : Pass<"moe-carry-prefix-folds", "::mlir::ModuleOp"> {
  let summary = "CPU: a row's prefix fold continues from the previous row's value";
  let description = [{
    A row-invariant `moe.fold` (marked by moe-hoist-row-invariants) whose bound is the domain's last row
    index `e`, and whose init and steps depend on neither `e` nor the contiguous index, computes a prefix
    over `j < e` (A3 numbers a (token, expert) row's slot by counting the routing map's experts before it).
    One CPU thread runs its rows in order, so this pass keeps the last row's indices and the fold's value
    in a stack cell of the kernel and, when the previous row was (same outer indices, e - 1), runs only the
    step j = e - 1 from the kept value; otherwise all e steps from init. Same steps, same order: results
    are bit-identical. (On the GPU rows run in parallel, and a row of points computes such a fold as a
    warp-wide scan: moe-lane-point-access.)

    ```mlir
    %k = moe.fold %e, %c0 {moe.row_invariant} : index { ^bb0(%j: index, %n: index): ... }
    // becomes (the cell %rows / %value is a memref.alloca at the kernel's entry)
    %continues = (e > 0) and %rows == [t, e - 1]
    %k = scf.if %continues -> (index) {
      ... the step's ops with %j = %e_minus_1, %n = %kept ...   // inline: no loop to set up
      scf.yield %next : index
    } else {
      %all = moe.fold %e, %c0 : index { ^bb0(%j: index, %n: index): ... }
      scf.yield %all : index
    }
    memref.store %t, %rows[%c0] ... memref.store %k, %value[%c0]
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"];
}

def MoeAccumulateRows : Pass<"moe-accumulate-rows", "::mlir::ModuleOp"> {
  let summary = "CPU: a row's reduction over gathered rows runs step by step over the whole row";
  let description = [{
    A row-at-a-time CPU domain (vectorized along its last dim) whose value is a reduction over gathered
    rows computes, by default, every step of the reduction for each vector along the row: the step's
    row-invariant work (its list entry, its index load and check) runs once per vector. This pass marks the
    reduction `moe.accumulated_row` when it
      - varies along the row and adds f32 terms: a sum, or a fold whose step is `acc + x` or fma(x, w, acc),
        rounded to T after each step or not (C2 accumulating in T, carried as f32), acc used only there;
      - has a bound (and init) that the row's prologue computes or that is defined outside the body, and
        is too long to unroll fully (a compacted list: moe-compact-predicated-folds, moe-short-lists);
      - is followed only by elementwise arithmetic on its result up to the yield;
    while everything else in the body is row-invariant and the row has a constant length.

    moe-lower-to-loops then runs the marked reduction's steps over the whole row into f32 accumulators on
    the stack, several steps a pass, each element still adding its terms in order (bit-identical results);
    a row whose list holds 1 to 8 steps at run time adds them directly in registers (C2 at Mixtral's top-2
    of 8: 0.82 -> 1.06-1.14 of a memcpy). `--disable accumulate-rows` leaves it unmarked, and moe-short-lists
    does not run on the CPU then (lit: `accumulate-rows.mlir`).

    ```mlir
    moe.compute %out[%T, %c16] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 1, vector = 8, unroll = 8>} {
    ^bb0(%t: index, %h: index):
      %list, %n = moe.compact %c40 {moe.row_invariant} : memref<40xi32> { ... }
      %acc = moe.fold %n, %cst : f32 { ^bb0(%i: index, %a: f32): ... x[%r, %h] ... }
      moe.yield %acc : f32
    }
    // becomes
      %acc = moe.fold %n, %cst {moe.accumulated_row} : f32 { ... }
    ```
  }];
}

def MoeInterleaveReductions : Pass<"moe-interleave-reductions", "::mlir::ModuleOp"> {
  let summary = "CPU: a point kernel's live points run their dot products together, a few at a time";
  let description = [{
    A point domain (it does not vectorize along its last dim, and a `moe.sum` in it reads along its own
    index: A3's `probs_grad[t, e] = sum(j < H) permuted_tokens[row, j] * grad[t, j]`) runs a dot product per
    point. One thread streaming one gathered row at a time reads it at about half the bandwidth of four
    streaming at once (a 2-core EPYC). This pass marks such a domain `moe.interleaved_points = N` (the
    `points` option, 4) when its body splits around the dot product: the sum comes first in the then-block
    of the scf.if that says the point is live (or is the body's carrier itself), only arithmetic follows it,
    the values it keeps per point are scalars, and its rows hold at least a page (4096 bytes: shorter dot
    products gain nothing from waiting in slots, which costs 1.7x at H = 64).

    moe-lower-to-loops then saves a live point's values in slot `pending` of small stack arrays; N saved
    points run their dot products in one loop along j, N vectors of 32 partial sums, and the points left
    waiting at the end of the range run one at a time. Each point adds the same terms in the same order:
    results are bit-identical. `--disable interleave-reductions` leaves the domain unmarked, a point at a
    time (lit: `interleave-reductions.mlir`).

    ```mlir
    moe.scatter %pg[%Tk, %c4] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, unroll = 4, vector = 1>} {
    ^bb0(%t: index, %e: index):
      ... %row = out_index[...], %live = row >= 0 ...
      %dot = scf.if %live -> (f32) {
        %s = moe.sum %c1024 : f32 { ^bb0(%j: index): ... pt[%row, %j] * grad[%t, %j] ... }
        scf.yield %s : f32
      } else { scf.yield %cst : f32 }
      moe.write ...
    }
    // becomes
    moe.scatter %pg[%Tk, %c4] {moe.interleaved_points = 4 : i64, schedule = ...} { ... }
    ```
  }];
  let options = [
    Option<"points", "points", "int64_t", "4", "how many live points' dot products run together (2 to 8)">
  ];
}

def MoeCompressLists : Pass<"moe-compress-lists", "::mlir::ModuleOp"> {
  let summary = "CPU with AVX-512: a list of live entries is built 16 entries a step, with a compress";
  let description = [{
    A `moe.compact` runs its predicate for each k below its bound and appends the k where it holds: on the
    CPU a loop of dependent selects, one entry at a time (C2's rowmap row at E = 256: 256 steps). Where
    the predicate vectorizes along k (its loads contiguous in k, the rest arithmetic or uniform), this pass
    marks the op `moe.compress_lanes = N` (the `lanes` option; the pipeline runs it where the host has
    AVX-512, with 16). The loop lowering then tests N entries at a time as vectors and stores each step's
    live indices compressed to the list's end (`llvm.experimental.vector.compress`, one vpcompressd and one
    vector store); the entries after the last whole step go one at a time. The list is the same. Where the
    list is most of the work (C2 with E = 256 and 64-wide rows) C2 runs at 0.10 of a memcpy instead of 0.06;
    at DeepSeek-V3's 7168-wide rows it gains 0.01-0.02. `--disable compress-lists` leaves it unmarked (lit: `compact-predicated-folds.mlir`).

    ```mlir
    %list, %count = moe.compact %c40 : memref<40xi32> {
    ^bb0(%e: index):
      %r = memref.load %rowmap[%t, %e] : memref<?x40xi32>
      %live = arith.cmpi sge, %r, %c0_i32 : i32
      moe.yield %live : i1
    }
    // becomes
    %list, %count = moe.compact %c40 {moe.compress_lanes = 16 : i64} : memref<40xi32> { ... }
    ```
  }];
  let options = [
    Option<"lanes", "lanes", "int64_t", "16", "entries tested at a time (a power of two from 2 to 64)">
  ];
}

#endif // MOE_MOE_PASSES_TD
