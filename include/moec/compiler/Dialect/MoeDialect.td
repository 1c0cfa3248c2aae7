//===- MoeDialect.td - The moe dialect ---------------------*- tablegen -*-===//
//
// The `moe` dialect holds an op after the front end and before scheduling decides how to run it: bare
// tensor pointers are viewed as memrefs, static symbols are still named (`moe.param`), and every
// assignment is one `moe.compute` over its output's index space whose body computes one element.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_TD
#define MOE_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Moe_Dialect : Dialect {
  let name = "moe";
  let summary = "MoE token-routing computations in index notation";
  let description = [{
    A kernel is a `func.func` whose arguments are bare tensor pointers (`!llvm.ptr`) and the runtime dims
    and attributes (`index`). Its body views each pointer as a memref (`moe.view`), names static symbols
    that specialization will fold (`moe.param`), and computes each output with a `moe.compute` region.
  }];
  let cppNamespace = "::moec::moe";
  let useDefaultAttributePrinterParser = 1;

  // The facts one pass hands to a later one, as attributes on the ops they are about. Each is declared here
  // and checked by verifyOperationAttribute (MoeDialect.cpp: its type and the ops it may sit on), like the
  // kernel arguments' `moe.arg` and `moe.unique` by verifyRegionArgAttribute.
  let discardableAttrs = (ins
    // moe-hoist-row-invariants: a top-level op of a domain body that does not depend on the contiguous
    // index (computed once per row), and a moe.write whose guard does not (the whole row is skipped).
    "::mlir::UnitAttr":$row_invariant,
    "::mlir::UnitAttr":$row_guard,
    // moe-compact-predicated-points: the moe.compact of a row's live points, the moe.fold that is a live
    // point's rank in it, and on the domain the constant its dead points write.
    "::mlir::UnitAttr":$live_list,
    "::mlir::UnitAttr":$live_rank,
    "::mlir::TypedAttr":$dead_value,
    // moe-lower-to-gpu: an scf.for along a row that every lane runs equally often (moe-unroll-row-loops), and
    // one whose results are a split sum's partial sums (a warp's dot product: moe-unroll-lane-sums).
    "::mlir::UnitAttr":$lane_loop,
    "::mlir::UnitAttr":$lane_sum,
    // moe-lower-to-loops (CPU): a vector.store of a kernel output, which the kernel writes once and never
    // reads back; the value is the byte alignment the store has where the output's base pointer is aligned
    // to it (a power of two, 16 or more). moe-streaming-stores makes it non-temporal where that holds.
    "::mlir::IntegerAttr":$streamable,
    // moe-compress-lists (CPU with AVX-512): a moe.compact whose predicate vectorizes tests this many
    // entries at a time and compresses their live indices into its list (a power of two from 2 to 64).
    "::mlir::IntegerAttr":$compress_lanes,
    // moe-accumulate-rows (CPU): the moe.fold or moe.sum of a row-at-a-time domain whose steps the row runs
    // one after the other over the whole row, into f32 accumulators.
    "::mlir::UnitAttr":$accumulated_row,
    // moe-interleave-reductions (CPU): a point domain whose live points run their dot products together,
    // this many at a time (2 to 8), so that their gathered rows stream at once.
    "::mlir::IntegerAttr":$interleaved_points,
    // moe-group-rows / moe-group-points (GPU): a domain run a block per group of rows or a warp per row of
    // points (the value: how many of the row's live points run their dot products together, a power of two
    // from 2 to 32), and the row-invariant ops that compute a group's keys.
    "::mlir::UnitAttr":$row_group,
    "::mlir::UnitAttr":$group_key,
    "::mlir::IntegerAttr":$point_rows,
    // moe-lane-point-access (GPU): a prefix-count moe.fold that a warp of points counts with a ballot.
    "::mlir::UnitAttr":$lane_scan,
    // moe-step-tables (GPU): a moe.fold of a domain's body, run along each row by a warp, whose per-step work
    // that does not vary along the row moe-lower-to-gpu does once per step in the row's prologue, into
    // shared-memory tables that the steps along the row read.
    "::mlir::UnitAttr":$step_table,
    // moe-widen-rounded-folds: an arith.truncf whose operand cannot be NaN (moe-expand-unchecked-roundings).
    "::mlir::UnitAttr":$nan_unchecked,
    // step tables (GPU): a warp vote whose result says that a fold's exact check held for every lane.
    "::mlir::UnitAttr":$exact_check_vote,
    // moe-native-bf16-roundings: an arith.truncf that must stay exact (not the native instruction).
    "::mlir::UnitAttr":$exact_rounding,
    // moe-lower-to-gpu: a kernel's rows per block (the runtime's launch geometry).
    "::mlir::IntegerAttr":$rows_per_block,
    // On the module: the op and dtype it computes (genMoe), and the outputs whose rows a kernel marks in
    // the workspace (moe-fill-uncovered-rows).
    "::mlir::StringAttr":$op,
    "::mlir::StringAttr":$dtype,
    "::mlir::ArrayAttr":$workspace
  );
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::LLVM::LLVMDialect"
  ];
}

class Moe_Op<string mnemonic, list<Trait> traits = []> : Op<Moe_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Moe_ScheduleAttr : AttrDef<Moe_Dialect, "Schedule"> {
  let mnemonic = "schedule";
  let summary = "How one moe.compute runs: rows per block, threads, vector width, reduction unroll";
  let description = [{
    The algorithm/schedule split of Halide: a `.moe` file says what to compute, this attribute says how.
    `moe-schedule` attaches one to every `moe.compute`; the lowering passes read it.

    * `rowsPerBlock`: GPU: output rows per thread block (block.y); CPU: unused.
    * `threads`: GPU: threads along the contiguous dim (block.x); CPU: unused.
    * `vector`: elements of the contiguous dim handled together (16-byte accesses for bf16 = 8).
    * `unroll`: how far `moe.sum` loops are unrolled.

    ```mlir
    moe.compute %out[%n, %h] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 128, vector = 8, unroll = 8>}
    ```
  }];
  let parameters = (ins "int64_t":$rowsPerBlock, "int64_t":$threads, "int64_t":$vector, "int64_t":$unroll);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Moe_UbRole : I32EnumAttr<"UbRole", "what an Ascend UB buffer holds (ascend::UbRole, same order)", [
    I32EnumAttrCase<"Input", 0, "in">,
    I32EnumAttrCase<"Output", 1, "out">,
    I32EnumAttrCase<"RowStore", 2, "row">,
    I32EnumAttrCase<"Accumulator", 3, "acc">,
    I32EnumAttrCase<"Index", 4, "idx">,
    I32EnumAttrCase<"Cast", 5, "cast">]> {
  let cppNamespace = "::moec::moe";
  let genSpecializedAttr = 0;
}

def Moe_UbBufferAttr : AttrDef<Moe_Dialect, "UbBuffer"> {
  let mnemonic = "ub_buffer";
  let summary = "One buffer of an Ascend core's Unified Buffer in a tiled kernel";
  let description = [{
    Its `role` and the tensor it holds: `in` (an input's row, streamed along it), `out` (the output's row,
    or a point row's value), `row` (a point row's fused row store), `acc` (the reduction's accumulators),
    `idx` (a tensor's row-invariant values, such as indices or probs) or `cast` (the f32 copy of a narrower
    input); for `acc` and `cast` the "tensor" is the element type, "f32". Its name, `<role>.<tensor>`
    (`fullName()`: "in.grad_expanded_x"), is what moe.ub_alloc and the tiling files call it.
    `elementBytes` per element of a row chunk (0 for a buffer of row-invariant values, which holds
    `fixedBytesPerRow` bytes per row instead), `copies` (2: a double-buffered queue), and `perRowOfPass`:
    whether it holds every row of a UB pass or one row at a time. An input whose GM row does not depend on
    the `reuseDims` innermost row indices is kept across the rows that share it and copied
    `copiesPerChunk` times per group of such rows and chunk (0, 0: copied for every row, as counted in
    the plan's `rowCopiesPerChunk`). `wholeRow` (printed only when true): such a kept input holds its whole
    row, every chunk of it, so that a row of several chunks is still copied once per group.

    ```mlir
    #moe.ub_buffer<in, "grad_expanded_x", elementBytes = 2, copies = 2, perRowOfPass = false, fixedBytesPerRow = 0,
                   reuseDims = 0, copiesPerChunk = 0>
    ```
  }];
  let parameters = (ins EnumParameter<Moe_UbRole>:$role,
                        StringRefParameter<"the tensor (the element type for acc and cast)">:$tensor,
                        "int64_t":$elementBytes, "int64_t":$copies, "bool":$perRowOfPass, "int64_t":$fixedBytesPerRow,
                        "int64_t":$reuseDims, "int64_t":$copiesPerChunk,
                        DefaultValuedParameter<"bool", "false">:$wholeRow);
  let assemblyFormat = [{
    `<` $role `,` $tensor `,` struct($elementBytes, $copies, $perRowOfPass, $fixedBytesPerRow, $reuseDims,
                                     $copiesPerChunk, $wholeRow) `>`
  }];
  let extraClassDeclaration = [{
    /// "<role>.<tensor>" ("in.x", "acc.f32"): the name moe.ub_alloc places it under, as the tiling files name it.
    std::string fullName() const { return (stringifyUbRole(getRole()) + "." + getTensor()).str(); }
  }];
}

def Moe_AscendPlanAttr : AttrDef<Moe_Dialect, "AscendPlan"> {
  let mnemonic = "ascend_plan";
  let summary = "The static part of an Ascend tiling plan for one moe.compute / moe.scatter";
  let description = [{
    `moe-plan-ascend` derives it from the scheduled IR for one chip (its UB size, alignment and copy
    limit): every row of the domain streams `rowLength` elements along its contiguous dim, `chunk` at a
    time (`chunks` passes), through `buffers` in the UB, double-buffered when `bufferCount` is 2; up to
    `maxRowsPerPass` rows share a pass. `pointRows`: the rows are the domain's points (a reduction along
    a contiguous dim, such as a dot product over H). `guardedRows`: a row's streaming work runs only when a
    condition of the row holds (a scatter's row guard, a dot product behind a test), so a call whose
    routing leaves rows dead costs less than `rows * rowBytes`. The DataCopy counts per row and chunk, per pass and
    chunk, and per pass, the row-invariant values per row (`rowScalars`, which the runtime may read as
    scalars instead), and the GM bytes a row moves, feed the cost model. The runtime adds the core
    split for each call's shapes (moec/runtime/ascend/Plan.h).

    ```mlir
    moe.compute %out[%n, %c7168] {ascend_plan = #moe.ascend_plan<chip = "910b", rowLength = 7168, chunk = 7168,
        chunks = 1, bufferCount = 2, maxRowsPerPass = 2, pointRows = false, guardedRows = true, rowCopiesPerChunk = 8,
        passCopiesPerChunk = 1, passCopies = 1, rowScalars = 8, rowBytes = 129056, buffers = [...]>, schedule = ...}
    ```
  }];
  let parameters = (ins StringRefParameter<>:$chip, "int64_t":$rowLength, "int64_t":$chunk, "int64_t":$chunks,
                        "int64_t":$bufferCount, "int64_t":$maxRowsPerPass, "bool":$pointRows, "bool":$guardedRows,
                        "int64_t":$rowCopiesPerChunk, "int64_t":$passCopiesPerChunk, "int64_t":$passCopies,
                        "int64_t":$rowScalars, "int64_t":$rowBytes, "::mlir::ArrayAttr":$buffers);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Moe_UbSpaceAttr : AttrDef<Moe_Dialect, "UbSpace"> {
  let mnemonic = "ub";
  let summary = "The memory space of an Ascend vector core's Unified Buffer";
  let description = [{
    The memory space of the buffers `moe.ub_alloc` places in a core's on-chip Unified Buffer. Vector code
    reads and writes only these; global memory reaches them through `moe.data_copy`. The CPU simulator
    maps it to ordinary memory (the simulator's per-core arena).

    ```mlir
    %raw = moe.ub_alloc %rt, %core "in.x" at 0 : memref<28672xi8, #moe.ub>
    %in = memref.view %raw[%c0][] : memref<28672xi8, #moe.ub> to memref<2x7168xbf16, #moe.ub>
    ```
  }];
}

def Moe_ArgRole : I32EnumAttr<"ArgRole", "what a kernel argument is", [
    I32EnumAttrCase<"Tensor", 0, "tensor">,
    I32EnumAttrCase<"Status", 1, "status">,
    I32EnumAttrCase<"Workspace", 2, "workspace">,
    I32EnumAttrCase<"Dim", 3, "dim">,
    I32EnumAttrCase<"Attr", 4, "attr">,
    I32EnumAttrCase<"RowBegin", 5, "row_begin">,
    I32EnumAttrCase<"RowEnd", 6, "row_end">,
    I32EnumAttrCase<"AscendRuntime", 7, "ascend_runtime">,
    I32EnumAttrCase<"AscendCore", 8, "ascend_core">,
    I32EnumAttrCase<"AscendCores", 9, "ascend_cores">]> {
  let cppNamespace = "::moec::moe";
  let genSpecializedAttr = 0;
}

def Moe_ArgAttr : AttrDef<Moe_Dialect, "Arg"> {
  let mnemonic = "arg";
  let summary = "The role of a kernel argument (the `moe.arg` of each func argument)";
  let description = [{
    What the runtime passes in an argument of a kernel, in the lean ABI's order: a `tensor` (a pointer to
    the tensor's data; `name` is the op's tensor), the `status` buffer, the `workspace` (moe-fill-uncovered-
    rows), a runtime `dim` or `attr` (an index; `name` is the op's), on the CPU the range of rows a call
    runs, `row_begin` and `row_end`, and on Ascend the simulator's runtime (`ascend_runtime`), the core and
    the cores (`ascend_core`, `ascend_cores`). Pointers are `!llvm.ptr`, the rest `index` (or an integer after
    convert-to-llvm); only a tensor, dim or attr has a name.

    ```mlir
    func.func @k(%x: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">}, %s: !llvm.ptr {moe.arg = #moe.arg<status>},
                 %h: index {moe.arg = #moe.arg<dim, "H">})
    ```
  }];
  let parameters = (ins EnumParameter<Moe_ArgRole>:$role, StringRefParameter<"the op's name for it", "\"\"">:$name);
  let assemblyFormat = "`<` $role (`,` $name^)? `>`";
  let extraClassDeclaration = [{
    /// Whether the argument is a pointer (a tensor, the status or the workspace), not an index.
    bool isPointer() const {
      return getRole() == ArgRole::Tensor || getRole() == ArgRole::Status || getRole() == ArgRole::Workspace ||
             getRole() == ArgRole::AscendRuntime;
    }
  }];
}

#endif // MOE_DIALECT_TD
