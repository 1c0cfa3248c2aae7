//===- GpuPasses.td - GPU passes ---------------------------*- tablegen -*-===//
//
// The GPU's passes: its moe-level groupings of rows and of points (and a row of points' prefix counts as
// warp ballots), the lowering to gpu kernels, and the passes on those kernels' loops (unrolled row loops,
// predicated loads).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_GPU_PASSES_TD
#define MOE_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

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
    the scf.if that says the point is live, only arithmetic after it. The mark's value is the batch: how
    many live points' dot products run together (`batch`; 8, or 4 under the opt-in `register-budget`:
    each point of a batch holds a vector's partial sums per lane, 8 registers for a bf16 row, and A3's
    batches of 8 kept its probs kernels at 250 registers).

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
    moe.scatter %pg[%Tk, %c256] {moe.point_rows = 8 : i64, schedule = ...} { ... }
    ```
  }];
  let options = [
    Option<"batch", "batch", "int64_t", "8",
           "how many live points of a row run their dot products together (a power of two from 2 to 32)">
  ];
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

def MoeStepTables : Pass<"moe-step-tables", "::mlir::ModuleOp"> {
  let summary = "GPU: a fold's per-step work that does not vary along the row runs once per step, into tables";
  let description = [{
    A fold along a row (its accumulator varies along the row's contiguous index) whose steps do work that
    does not (C2: a step's rowmap entry, its checks and its gathered row's prob) redoes that work for every
    vector of the row. This pass marks such a fold `moe.step_table` where a warp runs each row (a domain
    that is neither a point domain nor a row group) and its steps are known before the row's loop: a bound
    that is a constant or a `moe.compact`'s count, of at most 4096 steps, computed before the domain or by
    a row-invariant op (it runs after moe-hoist-row-invariants).

    moe-lower-to-gpu then does the marked folds' per-step work once per step in the row's prologue, each
    warp's lanes taking the steps round robin, into shared-memory columns (at most 32 KiB a domain, beside
    its lists), and the steps along the row read the columns. A check's column is also voted on per warp, so
    that moe-version-row-loops gives the loop a copy without the check's branch (lit:
    `gpu-step-tables.mlir`). `--disable step-tables` leaves the folds unmarked: every vector reloads.

    ```mlir
    moe.compute %out[%T, %c64] {schedule = #moe.schedule<rowsPerBlock = 8, threads = 32, vector = 4, unroll = 8>} {
    ^bb0(%t: index, %h: index):
      %acc = moe.fold %c8, %zero : f32 {
      ^bb0(%k: index, %a: f32):
        %r = memref.load %rowmap[%t, %k] : memref<?x8xi32>     // does not vary along the row
        ... memref.load %x[%r, %h] ...                          // does
      }
      moe.yield %acc : f32
    }
    // becomes
      %acc = moe.fold %c8, %zero {moe.step_table} : f32 { ... }
    ```
  }];
}

def MoeBudgetRegisters : Pass<"moe-budget-registers", "::mlir::ModuleOp"> {
  let summary = "GPU: each kernel is compiled for at most 128 registers a thread";
  let description = [{
    The opt-in `register-budget`: every `gpu.func` kernel gets `nvvm.maxnreg = 128`, which NVPTX writes as
    `.maxnreg 128`, so that ptxas leaves room for 16 warps of an SM's 64K registers (it otherwise takes up
    to 255 where the block size allows, and a kernel of 8 warps a block then runs one block per SM). The
    lowering must keep what a kernel holds live within the budget (moe-group-points' batches of 4 under the
    same bit), or ptxas spills: the budget alone turns registers into spills.

    ```mlir
    gpu.func @k(...) kernel attributes {known_block_size = array<i32: 32, 8, 1>} { ... }
    // becomes
    gpu.func @k(...) kernel attributes {known_block_size = array<i32: 32, 8, 1>, nvvm.maxnreg = 128 : i32} { ... }
    ```
  }];
  let options = [
    Option<"registers", "registers", "int64_t", "128", "the most registers a thread of a kernel may use">
  ];
}

def MoeUnrollLaneSums : Pass<"moe-unroll-lane-sums", "::mlir::ModuleOp"> {
  let summary = "GPU: a warp's loop along a dot product's row is unrolled, its steps' loads in flight together";
  let description = [{
    Runs on the loops right after moe-lower-to-gpu. A dot product that a warp computes along a whole row (a
    warp per point, or per batch of points: moe-group-points) waits for its loads once per step of its loop
    along j, and with few warps per SM that chain of waits bounds it. moe-lower-to-gpu marks that loop
    `moe.lane_sum` where every lane runs it the same constant number of steps (a constant row, a whole
    number of the warp's steps); its results are the lanes' partial sums. This pass unrolls it by the
    largest power of two that keeps at most 32 vector loads per lane in one step, divides its steps and
    leaves at least two (a warp per point, 2 loads a step: up to 16 steps; a batch of 2 points sharing a row,
    3 loads: 8; a step of more than 4 loads, a batch of 8 points whose registers already set the kernel's
    count: none). The loop then runs from 0, the lane's offset added in its body, and needs no remainder
    loop. A row of 7168 (28 steps) unrolls by 4: 4 divides 28 and leaves 7 steps, though 8 does not divide
    them. The adds run in the same order, so every partial sum is the same. It runs before
    moe-version-row-loops and moe-guard-loads, so that the unrolled steps' gathers, where they are guarded,
    issue together at the top of the step. `moec --disable loads-in-flight` leaves the loop as it is.

    Example (lit: `unroll-lane-sums.mlir`, and from the moe level `lower-to-gpu-loads-in-flight.mlir`):
    ```mlir
    %s = scf.for %j = %offset to %c4096 step %c256 iter_args(%acc = %zero) -> (vector<8xf32>) {
      ... 2 vector.load ... } {moe.lane_sum}
    // becomes
    %s = scf.for %j = %c0 to %c4096 step %c2048 iter_args(%acc = %zero) -> (vector<8xf32>) {
      ... 16 vector.load at %offset + %j, + 256, ..., + 1792 ... }
    ```
  }];
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
    `moec --disable loads-in-flight` leaves the marked loops as they are.

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

    A fold marked `moe.step_table` (moe-step-tables), whose steps do per-step work that does not vary along
    the row (C2: a step's rowmap entry, its checks and its gathered row's prob), does that work once per
    step in the row's prologue, each warp's lanes taking the steps round robin, into shared-memory columns;
    its steps along the row read the columns instead of redoing it for every vector.

    A dot product that a warp computes along a whole row (a warp per point, or per batch of points:
    moe-group-points) waits for its loads once per step of its loop along j, and with few warps per SM
    that chain of waits bounds it. Where every lane runs that loop the same constant number of steps (a
    constant row, a whole number of the warp's steps), the loop is marked `moe.lane_sum` (its results are
    the lanes' partial sums), and moe-unroll-lane-sums unrolls it (lit: `lower-to-gpu-loads-in-flight.mlir`).
    A loop along a row that every lane runs the same constant number of times is marked `moe.lane_loop`, for
    moe-unroll-row-loops.

    A row whose folds run over a short list (`moe.compact` of at most the unroll's steps in the row's
    prologue: moe-short-lists) runs its loop along the row in one version per
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
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect", "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::math::MathDialect"];
}

#endif // MOE_GPU_PASSES_TD
