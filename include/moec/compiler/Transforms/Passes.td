//===- Passes.td - moe dialect passes ----------------------*- tablegen -*-===//
//
// One pass per file under compiler/Transforms/, each with a lit test under tests/lit/. The order they run
// in is compiler/Pipeline.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_PASSES_TD
#define MOE_PASSES_TD

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
    func.func @scatter(..., %ws: !llvm.ptr {moe.arg = "workspace"}, ...) {
      %covered = moe.view %ws_at_0[%R] : !llvm.ptr -> memref<?xi8>
      moe.scatter %out[%Tk, %K, %c64] ... {
        ...
        scf.if %live_and_inside { memref.store %c1_i8, %covered[%row] : memref<?xi8> }
        moe.write %v to [%row, %h] if %live : bf16
      }
    }
    func.func @fill(..., %ws: !llvm.ptr {moe.arg = "workspace"}, ...) {
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
    their well-predicted branches), and whose step is `p ? acc : f(acc)` with `p` independent of the accumulator
    and of the contiguous index, becomes a `moe.compact` of the steps where `f` applies and a fold over
    that list, in the same order (results are bit-identical). With `moe-hoist-row-invariants` after it,
    the list is built once per row and every vector along the row does only the live steps: C2 then does
    K gathers per vector instead of E tests. A `moe.sum` whose term is `p ? 0.0 : f` is split the same
    way (its accumulator starts at +0.0, so it is never -0.0 and adding +0.0 changes nothing): B2's
    dropped or inactive rows cost no branch per vector. On the GPU (`target=gpu`) each warp keeps its list in shared
    memory, so only domains lowered a row at a time qualify, and the bound must fit; where a block's warps
    all run one row (C2 at 256 threads), the block builds one list, each warp testing every W-th run of 32
    steps, with two block barriers (the row's index loads once per block, not once per warp). With `short-folds`
    (the CPU pipeline's, unless accumulate-rows is off) a short fold or sum whose live steps add f32
    terms is compacted too: moe-lower-to-loops adds a short list's live steps directly in registers
    (C2 at Mixtral's top-2 of 8, B2 with inactive rows), without a test per step and vector. The GPU
    pipeline sets it too (unless short-lists is off), for folds only: moe-lower-to-gpu runs the row in a
    version per power of two of live steps, each fold step reading its step table (a short sum's steps
    would redo their row-invariant work for every vector: B2's top-8 stays as it is; lit:
    `lower-to-gpu-short-lists.mlir`).

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
    Option<"target", "target", "std::string", "\"cpu\"", "cpu or gpu">,
    Option<"shortFolds", "short-folds", "bool", "false",
           "also compact a fold short enough to unroll whose live steps add f32 terms (CPU accumulated rows)">
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

def MoeGroupRows : Pass<"moe-group-rows", "::mlir::ModuleOp"> {
  let summary = "GPU: rows of a scatter that write the same values run as one group, a block each";
  let description = [{
    A `moe.scatter` over (outer..., k, h) whose written value does not depend on k writes the same values
    to the row of every k (A3 copies token t's gradient row to the permuted row of each of its K slots).
    A warp per row reads the source row once per k. This pass marks such a scatter `moe.row_group`;
    moe-lower-to-gpu then runs a block per group (outer..., and a run of up to 16 consecutive k), its warps
    splitting the row: in each warp lane i computes member k = i's row-invariant values (its row, its
    guard, its checks), and along the row the warp computes the value once per vector and stores it to
    each live member's row, broadcast from that member's lane by `gpu.shuffle`. grid.x is the number of
    groups (a block each, so that a few tokens still give every SM work).

    The value may depend on k through at most four row-invariant integers or booleans, its keys (their ops
    marked `moe.group_key`): A3's drop-and-pad slots i copy the row of token permute_token_id[i], and
    the forward op orders a token's slots one after another. Along the row the warp then computes the
    value again only for a member whose keys, broadcast like its row, differ from the member before's;
    any order gives the same results, and sorted keys read each source row about once per run. Where the
    keys are integers, a group's run starts where a run of equal keys starts (emitKeyRunBounds): lane l
    computes member 16 g - 1 + l's row-invariant values, keys included, and a ballot of the lanes whose keys
    differ from the lane's before finds the first change in [16 g, 16 g + 15) and the next group's in
    [16 g + 16, 16 g + 31); the row-invariant ops that only store (a row's mark for the fill, a check's
    report) then run for the group's own members. A token's slots stay in one group (fixed runs split most
    top-8 tokens over two blocks, each reading the token's row), and the groups still partition the
    members, each run once. A body whose values along the row read no memory (a fill of constants) is left
    alone: there is nothing to share.

    It needs the row-invariant marks (moe-hoist-row-invariants), a warp per row (32 threads), a write
    guard that depends on the row only, and a body without reductions or lists (their lanes would run
    different members). A value computed under the guard's own condition, `scf.if %live { x[t, h] }
    else { 0 }` with the write guarded by `%live and ...`, becomes the load itself when the load's
    indices are domain indices within their dims: where the write happens the two are equal.

    ```mlir
    moe.scatter %dy[%Tk, %K, %c64] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, ...>} {
    ^bb0(%t: index, %k: index, %h: index):
      %row = ... out_index[t * K + k] ... {moe.row_invariant}
      %live = arith.cmpi sge, %row, %c0 {moe.row_invariant} : index
      %v = scf.if %live -> (bf16) { memref.load %g[%t, %h] ... } else { ... }
      moe.write %v to [%row, %h] if %live {moe.row_guard} : bf16
    }
    // becomes
    moe.scatter %dy[%Tk, %K, %c64] {moe.row_group, schedule = ...} {
      ...
      %v = memref.load %g[%t, %h] : memref<?x64xbf16>
      moe.write %v to [%row, %h] if %live {moe.row_guard} : bf16
    }

    // drop-and-pad: the value depends on slot i through the token id and `row >= 0`
    moe.scatter %dy[%R, %c64] {moe.row_group, schedule = ...} {
    ^bb0(%i: index, %h: index):
      %tok = arith.index_cast %id {moe.group_key, moe.row_invariant} : i32 to index
      %live = arith.cmpi sge, %row, %c0 {moe.group_key, moe.row_invariant} : index
      %v = scf.if %live -> (bf16) { ... memref.load %g[%tok, %h] ... }
      moe.write %v to [%rowOr0, %h] if %inRange {moe.row_guard} : bf16
    }
    ```
  }];
}

def MoeGroupPoints : Pass<"moe-group-points", "::mlir::ModuleOp"> {
  let summary = "GPU: a row of points whose dot products read a shared row runs on one warp";
  let description = [{
    A point kernel (a `moe.sum` along a contiguous dim per domain point) runs a warp per point. When a
    term of the dot product loads along the sum's index through indices that do not depend on the
    point's last index, the points of a row read that row again each: A3 with probs computes
    `sum(j < H) permuted_tokens[row, j] * grad[t, j]` for each expert e of token t, and reads token t's
    gradient row once per routed expert. This pass marks such a kernel `moe.point_rows`; moe-lower-to-gpu
    then runs a row of points (outer..., every e) per warp. The warp walks the points in order; a live
    point's dot product waits until 8 have (or the row ends), and they run together in one loop along j,
    what their terms share (the row they all read) loaded once per vector (a batch of at most 2 runs a
    loop with 2 slots). Each point's partial sums add
    the same terms in the same order, so results are bit-identical to a warp per point. The launch covers
    rows instead of points. Where a row's points are one chunk of at most 32 lanes (a one-dim domain's run,
    or a constant row of <= 32 points: A3's 8 experts at Mixtral's shape), a waiting point's values stay
    in its lane and the steps carry only a mask of the waiting lanes; a batch takes its points' values
    from their lanes by `gpu.shuffle`. Longer rows keep them in slots, carried from step to step.

    The shared row may depend on the point through at most four integers computed at the top of the body,
    its keys (their ops marked `moe.group_key`): A3's drop-and-pad probs_grad runs over slots i and reads
    token permute_token_id[i]'s row, and the forward op orders a token's slots one after another. A batch
    then holds points of one key (a live point of another runs the waiting ones first), and a one-dim
    domain runs as runs of 8 consecutive points, a warp each (`pointRuns` in the kernel metadata), each
    run moved to start where a run of equal keys starts (as moe-group-rows' groups, at most 16 points). A key
    loaded from a tensor declared `unique` (out_index) never repeats, so a term that needs one is not
    shared; of the terms that qualify, the one with the fewest keys is chosen.

    It needs a warp per point (32 threads) and a body whose dot product comes first in the then-block of
    the scf.if that says the point is live, only arithmetic after it.

    ```mlir
    moe.scatter %pg[%Tk, %c256] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, ...>} {
    ^bb0(%t: index, %e: index):
      ... %row = out_index[t * K + k], %live = row >= 0 ...
      %dot = scf.if %live -> (f32) {
        %s = moe.sum %c7168 : f32 {
        ^bb0(%j: index):
          %x = memref.load %pt[%row, %j] ...   // the point's own row
          %g = memref.load %grad[%t, %j] ...   // token t's row: the same for every e
          ...
        }
        scf.yield %s : f32
      } else { ... }
      moe.write ...
    }
    // becomes
    moe.scatter %pg[%Tk, %c256] {moe.point_rows, schedule = ...} { ... }
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

def MoeLanePointAccess : Pass<"moe-lane-point-access", "::mlir::ModuleOp"> {
  let summary = "GPU: a row of points' prefix counts over its points become warp ballots";
  let description = [{
    A row of points (`moe.point_rows`, moe-group-points) runs on one warp, 32 points at a time, a lane each
    (emitWarpPointRow): each lane runs its point's ops before the dot product, a ballot says which points
    are live, and only those enter the dot products, in order. A prefix count over the points before this
    one (A3's slot number: the routing map's experts before e) would cost each lane e steps. This pass
    marks it `moe.lane_scan` when each step adds a constant c or nothing (`acc + c`, or `p ? acc + c :
    acc`), its bound is the point's last index in a domain of rank > 1, its init is the same for the whole
    row, and its steps read nothing of the body but the row's outer indices. moe-lower-to-gpu then has
    each lane run its own point's step from 0 (only where a later point of the row needs it); a ballot
    (`vote.sync.ballot`) of the lanes whose step adds c gives each lane c times the count (`popc`) of
    those below it, continued from the 32 points before. Integer addition is associative, also when it
    wraps: the value is the fold's, bit for bit.

    ```mlir
    moe.scatter %pg[%Tk, %c256] {moe.point_rows, ...} {
    ^bb0(%t: index, %e: index):
      %k = moe.fold %e, %c0 : index {
      ^bb0(%j: index, %n: index):
        %b = memref.load %map[%t, %j] : memref<?x256xi8>
        %live = arith.cmpi ne, %b, %c0_i8 : i8
        %next = arith.addi %n, %c1 : index
        %s = arith.select %live, %next, %n : index
        moe.yield %s : index
      }
      ...
    }
    // becomes
      %k = moe.fold %e, %c0 {moe.lane_scan} : index { ... }
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
    With `streaming-stores` (the default) the vector stores of a large output are non-temporal.
    With `accumulate-rows` (the default) a row whose value is a reduction over gathered rows too long to
    unroll fully (C2's combine over its list of live experts) runs the reduction's steps over the whole row
    into f32 accumulators on the stack, several steps per pass, each element still adding its terms in
    order (bit-identical results). A row whose bound turns out to be 1 to 8 at run time (C2's K live
    experts of E) skips the accumulators: each step's row-invariant work runs once per row (step j past
    the bound redoes the last live one's, so it reads only what that one reads) and each vector adds its
    live steps' terms in registers, in step order, each step past the first under a `j < bound` branch
    that is the same for the whole row (C2 at DeepSeek-V3's and Qwen3's shapes: 0.62-0.65 of a memcpy
    through the accumulators, 0.71-0.76 without).

    A domain whose points each run a dot product along a contiguous dim and that does not vectorize along
    its last dim (A3's probs_grad[t, e] = sum(j < H) ...) runs by point instead: the range is of points
    (all dims flattened), and the runtime splits points, not rows, over threads. With
    `interleave-reductions` (the default) a point whose dot product runs (the condition around it holds)
    waits in one of four slots; four waiting points run their dot products together in one loop along j,
    so four gathered rows stream at once, each point's partial sums adding the same terms in the same order.

    ```mlir
    %n = scf.for %p = %begin to %end iter_args(%pending = %c0) {
      ... the point's ops before the sum; scf.if %live { save them in slot %pending; when 4 are saved:
          scf.for %j = 0 to H step 32 { 4 x vector<32 x f32> partial sums } and each point's write }
      else { the point's write now }
    }
    scf.for %q = 0 to %n { the points left waiting, one at a time }
    ```
  }];
  let options = [
    Option<"streamingStores", "streaming-stores", "bool", "true",
           "non-temporal vector stores of the output (no read for ownership)">,
    Option<"accumulateRows", "accumulate-rows", "bool", "true",
           "reductions along the row run step by step over the whole row, into f32 accumulators">,
    Option<"interleaveReductions", "interleave-reductions", "bool", "true",
           "point kernels: the dot products of four live points run together along the row">,
    Option<"compactLanes", "compact-lanes", "int64_t", "0",
           "a moe.compact tests this many entries at a time as vectors and compresses the live indices into "
           "its list (0: one at a time; the pipeline sets 16 where the host has AVX-512)">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect",
                           "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect", "::mlir::math::MathDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def MoeBf16Bits : Pass<"moe-bf16-bits", "::mlir::ModuleOp"> {
  let summary = "CPU: carries bf16 values through selects, branches and loops as their 16 bits";
  let description = [{
    Runs after arith-expand-ops (which rounds f32 to bf16 with integer ops), before the conversion to
    LLVM. An `arith.select` on bf16 (the expansion's NaN case), an `scf.if` result and an `scf.for`
    iter_arg of bf16 type (a fold that rounds its accumulator to bf16 after every step: C2 without mixed
    precision) become i16 values of the same shape, bitcast at their ends. x86 without AVX512-BF16 has no
    bf16 registers and would legalize each such select or phi by widening every lane to f32 and rounding
    it back with a libcall per element (C2 at Mixtral: 0.02 of a memcpy). The bits are the same, so every
    result is.

    ```mlir
    %r = arith.select %isNan, %nan, %rounded : vector<16xbf16>
    // becomes
    %a = arith.bitcast %nan : vector<16xbf16> to vector<16xi16>
    %b = arith.bitcast %rounded : vector<16xbf16> to vector<16xi16>
    %s = arith.select %isNan, %a, %b : vector<16xi1>, vector<16xi16>
    %r = arith.bitcast %s : vector<16xi16> to vector<16xbf16>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def MoeExpandUncheckedRoundings : Pass<"moe-expand-unchecked-roundings", "::mlir::ModuleOp"> {
  let summary = "CPU: a marked bf16 rounding read back as f32 becomes integer ops without the NaN case";
  let description = [{
    Runs before arith-expand-ops. `arith.extf(arith.truncf(y))` from f32 to bf16 and back, where the
    truncf is marked `moe.nan_unchecked` (moe-widen-rounded-folds{unchecked-roundings}), becomes the
    round-to-nearest-even of arith-expand-ops on y's bits, kept in f32: `(bits + 0x7fff + bit16) &
    0xffff0000`, without its NaN test and select (on x86 a compare into a mask register and a masked move
    in every step of C2's chain of roundings). The marked roundings are of sums of two bf16 values, whose
    low 16 bits are zero, so a NaN sum is an operand's NaN or the CPU's default NaN (x86 0xffc00000,
    AArch64 and RISC-V 0x7fc00000), low 16 bits zero too: the bias then never carries out of them, and the
    NaN stays the same NaN. The fold's result is rounded with the NaN case, so every result is the same.
    (PTX's default NaN is 0x7fffffff, which the bias would carry into the sign: CPU only.)
    Where y's low 16 bits are known to be zero (a widened bf16 value, plus a zero, through selects and sign
    changes: the first step of an unrolled fold whose accumulator starts at 0.0), the rounding is the
    identity and the widening reads y itself.

    ```mlir
    %t = arith.truncf %y {moe.nan_unchecked} : vector<16xf32> to vector<16xbf16>
    %w = arith.extf %t : vector<16xbf16> to vector<16xf32>
    // becomes
    %b = arith.bitcast %y : vector<16xf32> to vector<16xi32>
    %s = arith.shrui %b, %c16 : vector<16xi32>
    %l = arith.andi %s, %c1 : vector<16xi32>
    %bias = arith.addi %l, %c7fff : vector<16xi32>
    %u = arith.addi %b, %bias : vector<16xi32>
    %r = arith.andi %u, %cffff0000 : vector<16xi32>
    %w = arith.bitcast %r : vector<16xi32> to vector<16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def MoeNativeBf16Roundings : Pass<"moe-native-bf16-roundings", "::mlir::ModuleOp"> {
  let summary = "CPU with AVX512-BF16: a vector rounding of f32 to bf16 by vcvtne(2)ps2bf16 where it is exact";
  let description = [{
    Runs before arith-expand-ops, on CPUs with AVX512-BF16 and AVX512-DQ (the pipeline adds it only
    there). arith-expand-ops rounds f32 to bf16 exactly with ~8 integer instructions per 16 lanes, NaN
    case and pack included; vcvtneps2bf16 rounds 16 lanes to nearest even in one, but it reads subnormal
    inputs as zero and keeps a NaN's payload. A normal f32 never rounds to a subnormal bf16 (same
    exponent range), so the instruction is exact for everything else. A rounding of vector<16k x f32>
    becomes a test of each 16 lanes for NaN or subnormal (vfpclassps), the instruction (inline asm: the
    target machine keeps the feature off so that LLVM never uses it for its own roundings) where no lane
    is one, and the exact rounding otherwise. Each 32 lanes round by one vcvtne2ps2bf16 (2 uops, where
    two vcvtneps2bf16 and their join take 5). Every result is the same.

    ```mlir
    %r = arith.truncf %x : vector<32xf32> to vector<32xbf16>
    // becomes
    %lo = vector.extract_strided_slice %x {offsets = [0], sizes = [16], strides = [1]}
    %mlo = llvm.call_intrinsic "llvm.x86.avx512.fpclass.ps.512"(%lo, %c161) : (...) -> vector<16xi1>
    ... the same for lanes 16-31, or'ed into %m
    %any = vector.reduction <or>, %m : vector<16xi1> into i1
    %r = scf.if %any -> (vector<32xbf16>) {
      scf.yield (arith.truncf %x, expanded exactly by arith-expand-ops)
    } else {
      %bits = llvm.inline_asm "vcvtne2ps2bf16 $1, $2, $0", "=v,v,v" %lo, %hi
                : (vector<16xf32>, vector<16xf32>) -> vector<32xi16>
      ... bitcast to vector<32xbf16> and yielded
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect", "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def MoeWidenBf16Pairs : Pass<"moe-widen-bf16-pairs", "::mlir::ModuleOp"> {
  let summary = "CPU: bf16 rows widened in place, the even lanes first, where the loop computes lane-wise";
  let description = [{
    Runs on the CPU before the roundings are expanded. A 32-bit word of a bf16 row holds two values, each
    an f32 in place once the other is cleared: the low one shifted left by 16, the high one and'ed with
    0xffff0000. Where everything an innermost loop computes from its widened loads (`arith.extf` of a
    `vector.load` of vector<2k x bf16>) is lane-wise (arith ops, the loop's carried values, scf.if
    results), those loads widen that way, their lanes in the paired order (even elements, then odd), and
    a `vector.shuffle` puts them back in order where a value leaves (a store, a reduction, a use after
    the loop). x86 widened 16 lanes with a vpmovzxwd and a vpslld; now 32 lanes take an and and a shift.
    A loop is paired only where its widenings save more uops (2 each) than its shuffles cost (1 for a
    16-bit vector, 2 otherwise). Every lane computes what it did, so every result is the same.

    ```mlir
    %x = vector.load %rows[%r, %h] : memref<?x4096xbf16>, vector<32xbf16>
    %f = arith.extf %x : vector<32xbf16> to vector<32xf32>
    %s = arith.addf %acc, %f : vector<32xf32>
    // becomes
    %w = vector.bitcast %x : vector<32xbf16> to vector<16xi32>
    %even = arith.shli %w, %c16 : vector<16xi32>
    %odd = arith.andi %w, %cHigh : vector<16xi32>
    %f = vector.shuffle (bitcast %even), (bitcast %odd) [0, 1, ..., 31] : vector<16xf32>, vector<16xf32>
    %s = arith.addf %acc, %f : vector<32xf32>          // %acc in the paired order too
    ...
    %out = vector.shuffle %r, %r [0, 16, 1, 17, ..., 15, 31] : vector<32xbf16>, vector<32xbf16>
    vector.store %out, ...
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::vector::VectorDialect"];
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

def MoeUnrollRowLoops : Pass<"moe-unroll-row-loops", "::mlir::ModuleOp"> {
  let summary = "GPU: a loop along a row that each thread runs a few times is unrolled, its steps' loads in flight together";
  let description = [{
    Runs on the loops, after moe-version-row-loops and moe-guard-loads. A GPU thread that runs a loop along a
    row a few times waits for each step's gathers before it stores that step's result and branches back:
    only one step's loads are in flight at a time. C2 at Mixtral (H = 4096, a block of 256 threads per token)
    runs 2 steps of 2048 elements per thread, and a token's 2 gathered rows, then the next 2, each wait a
    full load latency. moe-lower-to-gpu marks a loop along a row `moe.lane_loop` where every lane runs the
    same constant number of steps (the lane's offset is below the step, and the row a whole number of
    steps). This pass runs each marked loop from 0, the lane's offset added in its body, and unrolls it by
    the largest power of two that divides its steps, keeps at most 8 vector loads (plain or guarded) per
    lane in one step (32 registers of data: more cost B2 with active_num at Qwen3 a quarter of its warps per
    SM), and at most 4096 ops: fully where that covers every step. The steps then issue their
    loads back to back. They compute and store the same values in the same order, so results do not change.
    A loop it does not unroll stays from the lane's offset: no constant count for LLVM to unroll it by unasked
    (B2 at Qwen3's 2 steps of 8 gathers, unrolled, lost a quarter of its warps per SM to the registers).
    `moec --disable loads-in-flight` leaves the loops unmarked.

    Example (lit: `unroll-row-loops.mlir`):
    ```mlir
    scf.for %h = %offset to %c4096 step %c2048 { ... vector.load ... vector.store ... } {moe.lane_loop}
    // becomes the body twice, at %h = %offset + 0 and %offset + 2048, without a loop
    ```
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

def MoeGuardLoads : Pass<"moe-guard-loads", "::mlir::ModuleOp"> {
  let summary = "GPU: a skippable term's load in a loop along a row becomes a predicated load, without a branch";
  let description = [{
    Runs on the loops, after moe-version-row-loops. A GPU thread waits for a load behind a branch before it
    takes the next branch, so the terms of a row whose terms may be skipped (`scf.if %live -> { load; extf }
    else { zero }`: B2's rows past active_num, C2's unrouted experts) gather one at a time. This pass rewrites
    such a branch, inside an innermost loop, with one result, one 4-, 8- or 16-byte vector load of a tensor
    the kernel only reads on one side and pure ops without regions besides, and a value from outside it on
    the other (zero, or the accumulator passed on; the load's guard is then the negated condition): the load
    becomes `moe.guarded_load` (a predicated `ld.global.nc` that gives zero where
    the guard is off). Where that side's ops turn a zero load into the other side's value (extf of zero is
    zero) they run on it unconditionally and are the result. Otherwise (`acc + extf(load)`: the accumulator
    passed on) the arithmetic stays behind a branch on the guard, and the guarded loads of the loop's later
    terms (with the ops their addresses need) move before its first such branch: every term's load issues
    before any term waits, and a skipped term costs its load's setup and a branch, not its arithmetic and a
    select per lane (C2 at Mixtral's 8 experts skips 6 terms of 8). A term that gives zero when skipped and
    is added to a sum that is never -0.0 (a constant without -0.0, or a sum of which one operand is such:
    B2's `acc + (live ? f32(x) : 0.0)` from +0.0) takes its add behind that branch too, as adding +0.0 does
    not change such a sum (B2 with active_num skips half its rows). A side that stores keeps its ops
    unconditional, with an `arith.select`.
    The side may also load scalars of 2 or 4 bytes (a point's prob: guarded
    too) and store vectors, directly or in a branch that only stores (a batch's point writing its row):
    those become `moe.guarded_store`, a predicated `st.global`, under the side's guard and the branch's
    condition. A branch in such a loop that only stores becomes guarded stores too, so that no load after it
    waits for the stored value. Scalar loads on their own (a list's index, a flag) stay behind their
    branches. Results do not change.

    ```mlir
    %t = scf.if %live -> (vector<8xf32>) {
      %v = vector.load %x[%row, %h] : memref<?x7168xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      scf.yield %w : vector<8xf32>
    } else {
      scf.yield %zero : vector<8xf32>
    }
    // becomes
    %v = moe.guarded_load %x[%row, %h] if %live readonly : memref<?x7168xbf16>, vector<8xbf16>
    %t = arith.extf %v : vector<8xbf16> to vector<8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::moec::moe::MoeDialect"];
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

def MoeLowerToGPU : Pass<"moe-lower-to-gpu", "::mlir::ModuleOp"> {
  let summary = "GPU: turns each kernel into a gpu.func; rows map to the grid, the row to threads";
  let description = [{
    For the GPU targets. Each kernel `func.func` moves into a `gpu.module` as a `gpu.func ... kernel`
    with the same lean arguments. With the schedule's `rowsPerBlock` = Y, `threads` = X and `vector` = V:

    ```mlir
    %row = block_id.x * Y + thread_id.y
    scf.if %row < %rows {
      scf.for %h = thread_id.x * V to H_main step X * V { vector body }   // 16-byte accesses
      scf.for %h = H_main + thread_id.x to H step X { scalar body }
    }
    ```
    The launch geometry is grid = (ceil_div(rows, Y), 1, 1), block = (X, Y, 1); it is recorded on the
    gpu.func as `moe.block` and in the kernel metadata.

    With `step-tables` (the default), a fold along the row whose steps do per-step work that does not vary
    along the row (C2: a step's rowmap entry, its checks and its gathered row's prob) does that work once
    per step in the row's prologue, each warp's lanes taking the steps round robin, into shared-memory
    columns; its steps along the row read the columns instead of redoing it for every vector.

    A dot product that a warp computes along a whole row (a warp per point, or per batch of points:
    moe-group-points) waits for its loads once per step of its loop along j, and with few warps per SM
    that chain of waits bounds it. The loop is unrolled by the largest power of two that keeps at most 32
    vector loads per lane in one step, divides its steps and leaves at least two (a warp per point, 2 loads
    a step: up to 16 steps; a batch of 2 points sharing a row, 3 loads: 8; a batch of 8, 9 loads, whose
    registers set the kernel's count: none). Only where every lane runs
    the same constant number of steps (a constant row, a whole number of the warp's steps): the loop then
    runs from 0, the lane's offset added in its body, and needs no remainder loop. The adds run in the same
    order, so every partial sum is the same (lit: `lower-to-gpu-loads-in-flight.mlir`). `loads-in-flight=false`
    (`moec --disable loads-in-flight`) leaves the loop as it is, and marks no loop for moe-unroll-row-loops
    (a loop along a row that every lane runs the same constant number of times, `moe.lane_loop`).

    A row whose folds run over a short list (`moe.compact` of at most the unroll's steps in the row's
    prologue: moe-compact-predicated-folds with `short-folds`) runs its loop along the row in one version per
    power of two of live steps: a row with none writes the folds' inits; one with at most 2 (4, ...) takes
    the version whose folds run 2 (4, ...) steps, the last the list's length. Step j reads the list and
    its step table at min(j, count - 1), only entries that live steps wrote, and adds its term only where
    j < count; the steps unroll, and moe-guard-loads makes their gathers predicated loads that issue
    together. A warp's row takes one version (a uniform branch): C2 at Mixtral's top-2 of 8 gathers 2 rows
    per vector, not 8 behind their tests (lit: `lower-to-gpu-short-lists.mlir`). A list of at most 32 entries
    is one ballot, lane k testing entry k, and each live lane writes the step table's row of its own entry at
    its place; a weight of such a list's steps (a float that a load gives and only the term's arithmetic reads:
    C2's prob) stays out of the table, loaded by the step, so that its load overlaps the gathers.
  }];
  let options = [
    Option<"stepTables", "step-tables", "bool", "true",
           "fold steps read their row-invariant values from tables the row's prologue fills">,
    Option<"loadsInFlight", "loads-in-flight", "bool", "true",
           "a warp's loop along a dot product's row is unrolled so that several steps' loads are in flight">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect", "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::math::MathDialect"];
}

#endif // MOE_PASSES_TD
