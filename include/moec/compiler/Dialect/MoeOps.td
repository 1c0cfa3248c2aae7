//===- MoeOps.td - Operations of the moe dialect -----------*- tablegen -*-===//
#ifndef MOE_OPS_TD
#define MOE_OPS_TD

include "moec/compiler/Dialect/MoeDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinTypes.td"
include "mlir/Dialect/LLVMIR/LLVMOpBase.td"

//===----------------------------------------------------------------------===//
// moe.param
//===----------------------------------------------------------------------===//

def Moe_ParamOp : Moe_Op<"param", [Pure]> {
  let summary = "A static dim or attribute, not yet bound";
  let description = [{
    Names a static symbol of the op (a dim such as `H`, an attribute such as `K`). `moe-specialize`
    replaces it by the constant the kernel is specialized for; no `moe.param` survives specialization.
    Int symbols are `index`, bool attributes `i1`.

    ```mlir
    %H = moe.param "H" : index
    %pad = moe.param "drop_pad_mode" : index
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs AnyTypeOf<[Index, I1]>:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// moe.view
//===----------------------------------------------------------------------===//

def Moe_ViewOp : Moe_Op<"view", [Pure]> {
  let summary = "Views a bare tensor pointer as a row-major memref";
  let description = [{
    Kernels take bare pointers (the lean ABI: one pointer per tensor plus the runtime dims), and this op
    gives the body a memref to index. One size operand per dimension; sizes that are constants become
    static dims of the result type on canonicalization. Lowers to a memref descriptor built in registers.

    ```mlir
    %g = moe.view %arg0[%R, %H] : !llvm.ptr -> memref<?x?xbf16>
    // after moe-specialize binds H = 7168:
    %g = moe.view %arg0[%R, %c7168] : !llvm.ptr -> memref<?x7168xbf16>
    ```
  }];
  let arguments = (ins AnyType:$ptr, Variadic<Index>:$sizes);
  let results = (outs AnyMemRef:$result);
  let assemblyFormat = "$ptr `[` $sizes `]` attr-dict `:` type($ptr) `->` type($result)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// moe.compute
//===----------------------------------------------------------------------===//

def Moe_ComputeOp : Moe_Op<"compute", [SingleBlock]> {
  let summary = "Computes every element of an output";
  let description = [{
    `out[i0, ..., in] = body`: for every index tuple below `bounds` (the output's shape), the body runs
    with the tuple as its block arguments and yields the element, which is stored. Elements are
    independent, so the lowering may run them in any order, in parallel, or a vector at a time along the
    last (contiguous) dim. The optional `schedule` says how (see `#moe.schedule`).

    ```mlir
    moe.compute %grad_x[%N, %H] : memref<?x7168xbf16> {
    ^bb0(%n: index, %h: index):
      %v = ... : f32
      %b = arith.truncf %v : f32 to bf16
      moe.yield %b : bf16
    }
    ```
  }];
  let arguments = (ins AnyMemRef:$output, Variadic<Index>:$bounds, OptionalAttr<Moe_ScheduleAttr>:$schedule);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$output `[` $bounds `]` attr-dict `:` type($output) $body";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.sum
//===----------------------------------------------------------------------===//

def Moe_SumOp : Moe_Op<"sum", [SingleBlock, RecursiveMemoryEffects]> {
  let summary = "f32 sum of a body over 0 <= k < bound, in order";
  let description = [{
    Accumulates the body's f32 result for k = 0, 1, ..., bound - 1 into an f32 that starts at +0.0. The
    order is fixed (the kernel is deterministic and matches a sequential reference bit for bit); the
    lowering may unroll but never reassociates.

    ```mlir
    %s = moe.sum %K : f32 {
    ^bb0(%k: index):
      ...
      moe.yield %x : f32
    }
    ```
  }];
  let arguments = (ins Index:$bound);
  let results = (outs F32:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$bound attr-dict `:` type($result) $body";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.fold
//===----------------------------------------------------------------------===//

def Moe_FoldOp : Moe_Op<"fold", [SingleBlock, RecursiveMemoryEffects, AllTypesMatch<["init", "result"]>]> {
  let summary = "Sequential fold of a body over 0 <= k < bound";
  let description = [{
    `acc = init; for k in 0 ..< bound: acc = body(k, acc)`, in order. The general form behind prefix
    counts, last-match searches and accumulations in a chosen precision (e.g. bf16 rounded after every
    add). `moe.sum` is the f32-sum special case.

    ```mlir
    %n = moe.fold %e, %c0 : index {
    ^bb0(%j: index, %acc: index):
      ...
      moe.yield %next : index
    }
    ```
  }];
  let arguments = (ins Index:$bound, AnyType:$init);
  let results = (outs AnyType:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$bound `,` $init attr-dict `:` type($result) $body";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.compact
//===----------------------------------------------------------------------===//

def Moe_CompactOp : Moe_Op<"compact", [SingleBlock, RecursiveMemoryEffects]> {
  let summary = "The indices below a static bound where a predicate holds, in increasing order";
  let description = [{
    Runs the predicate region for k = 0, 1, ..., bound - 1 and returns the k where it yields true, in
    increasing order, as the first `count` entries of `list` (the rest is unspecified). The bound is a
    constant and the list's length. `moe-compact-predicated-folds` creates it so that a fold whose steps
    mostly leave the accumulator alone runs only over the live steps; `moe-hoist-row-invariants` then
    usually moves it out of the loop along the row. The loop lowerings place the list: a stack array on
    the CPU, a per-warp array in shared memory on the GPU, built there with a ballot and population counts.

    ```mlir
    %list, %count = moe.compact %c256 : memref<256xi32> {
    ^bb0(%e: index):
      %r = memref.load %rowmap[%t, %e] : memref<?x256xi32>
      %live = arith.cmpi sge, %r, %c0_i32 : i32
      moe.yield %live : i1
    }
    ```
  }];
  let arguments = (ins Index:$bound);
  let results = (outs MemRefRankOf<[I32], [1]>:$list, Index:$count);
  let regions = (region SizedRegion<1>:$predicate);
  let assemblyFormat = "$bound attr-dict `:` type($list) $predicate";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.scatter, moe.write
//===----------------------------------------------------------------------===//

def Moe_ScatterOp : Moe_Op<"scatter", [SingleBlock]> {
  let summary = "Runs a body over an iteration domain; each point may write one output element";
  let description = [{
    For every point of the domain (`bounds`, one per block argument) the body runs and ends with a
    `moe.write` naming the element it stores and, optionally, a guard. The written indices are expected
    to be distinct (the DSL's `unique` index tensors), so points are independent: the lowering treats the
    domain like a compute's (rows, then the last dim along vectors) and needs no atomics.

    ```mlir
    moe.scatter %dy[%Tk, %K, %c7168] : memref<?x7168xbf16> {
    ^bb0(%t: index, %k: index, %h: index):
      %row = ...
      %live = arith.cmpi sge, %row, %c0 : index
      moe.write %v to [%row, %h] if %live : bf16
    }
    ```
  }];
  let arguments = (ins AnyMemRef:$output, Variadic<Index>:$bounds, OptionalAttr<Moe_ScheduleAttr>:$schedule);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$output `[` $bounds `]` attr-dict `:` type($output) $body";
  let hasVerifier = 1;
}

def Moe_WriteOp : Moe_Op<"write", [Terminator, HasParent<"ScatterOp">, AttrSizedOperandSegments]> {
  let summary = "Ends a moe.scatter body: store the value at the indices, if the guard holds";
  let description = [{
    ```mlir
    moe.write %v to [%row, %h] if %live : bf16
    ```
  }];
  let arguments = (ins AnyType:$value, Variadic<Index>:$indices, Optional<I1>:$guard);
  let assemblyFormat = "$value `to` ` ` `[` $indices `]` (`if` $guard^)? attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// moe.row_store
//===----------------------------------------------------------------------===//

def Moe_RowStoreOp : Moe_Op<"row_store", [HasParent<"SumOp">, AttrSizedOperandSegments]> {
  let summary = "Inside a moe.sum along a row: store element j of another output's row, if the guard holds";
  let description = [{
    Statement fusion (dsl::FusedRows): a row assignment that runs inside a point kernel's dot product, so
    that the rows the sum reads and the rows the assignment writes are visited in one pass. The last index
    is the sum's own index j; the other indices and the guard do not depend on it (the frontend computes
    them before the sum). The loop lowerings store a vector of the row per vector of terms.

    ```mlir
    %s = moe.sum %c7168 : f32 {
    ^bb0(%j: index):
      %u = memref.load %grad[%t, %j] : memref<?x7168xbf16>
      %g = arith.mulf ...
      moe.row_store %g to %out[%row, %j] if %live : bf16, memref<?x7168xbf16>
      moe.yield %term : f32
    }
    ```
  }];
  let arguments = (ins AnyType:$value, Arg<AnyMemRef, "the output", [MemWrite]>:$output,
                       Variadic<Index>:$indices, Optional<I1>:$guard);
  let assemblyFormat = [{
    $value `to` $output `[` $indices `]` (`if` $guard^)? attr-dict `:` type($value) `,` type($output)
  }];
  let hasFolder = 1; // a memref.cast of the output folds in, as into memref.store
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.guarded_load
//===----------------------------------------------------------------------===//

def Moe_GuardedLoadOp : Moe_Op<"guarded_load"> {
  let summary = "A load that reads memory only where its guard holds, and gives zero elsewhere, without a branch";
  let description = [{
    moe-guard-loads (GPU) makes it of a load inside a branch of a loop along a row (a term of a sum that may
    be skipped: B2's row past active_num, C2's expert that is not routed): the gathers of the loop's terms
    are then one basic block, issued back to back. A vector of 4, 8 or 16 bytes (or a scalar of 2 or 4) of
    a memref whose last dim is contiguous, at an address aligned to its size (it moves as one access). On the GPU it lowers to a predicated `ld.global` (`.nc`, in any
    order with the kernel's stores, where `readonly` says the kernel never writes the tensor) at a global-space
    address (NVPTX folds the cast with the kernel argument's own: no cvta to generic and back), on other
    targets to `llvm.masked.load`.

    ```mlir
    %v = moe.guarded_load %x[%row, %h] if %live readonly : memref<?x7168xbf16>, vector<8xbf16>
    ```
  }];
  let arguments = (ins Arg<AnyMemRef, "the tensor", [MemRead]>:$memref, Variadic<Index>:$indices, I1:$guard,
                       UnitAttr:$readonly);
  let results = (outs AnyType:$result);
  let assemblyFormat = [{
    $memref `[` $indices `]` `if` $guard (`readonly` $readonly^)? attr-dict `:` type($memref) `,` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.guarded_store
//===----------------------------------------------------------------------===//

def Moe_GuardedStoreOp : Moe_Op<"guarded_store"> {
  let summary = "A store that writes memory only where its guard holds, without a branch";
  let description = [{
    moe-guard-loads (GPU) makes it of a store inside the branch it flattens (a point of a batch of dot
    products that is not active writes nothing: A3's probs kernels): the branch's loads and stores then stay
    in one basic block, the next term's load issued before this one's store waits for its value. Sizes as
    for moe.guarded_load. On the GPU it lowers to a predicated `st.global`, elsewhere to `llvm.masked.store`.

    ```mlir
    moe.guarded_store %v, %y[%row, %h] if %live : memref<?x7168xbf16>, vector<8xbf16>
    ```
  }];
  let arguments = (ins AnyType:$value, Arg<AnyMemRef, "the tensor", [MemWrite]>:$memref, Variadic<Index>:$indices,
                       I1:$guard);
  let assemblyFormat = [{
    $value `,` $memref `[` $indices `]` `if` $guard attr-dict `:` type($memref) `,` type($value)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.yield
//===----------------------------------------------------------------------===//

def Moe_YieldOp : Moe_Op<"yield", [Pure, Terminator, ParentOneOf<["ComputeOp", "SumOp", "FoldOp", "CompactOp"]>]> {
  let summary = "Ends a moe.compute, moe.sum, moe.fold or moe.compact body with its value";
  let description = [{
    ```mlir
    moe.yield %v : bf16
    ```
  }];
  let arguments = (ins AnyType:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Ascend: Unified Buffer placement and DataCopy (moe-lower-to-ascend)
//===----------------------------------------------------------------------===//

def Moe_UbAllocOp : Moe_Op<"ub_alloc"> {
  let summary = "Places a buffer in the core's Unified Buffer";
  let description = [{
    Places buffer `name`, as raw bytes, at byte `offset` of core `core`'s UB, until `moe.ub_free`. Kernels
    view it with the element type and shape it holds (`copies x chunk`: a double-buffered queue has two
    copies), as AscendC's `TBuf::Get<T>()` does; two views of one buffer alias (the output staged in the
    accumulators). `runtime` is the core's runtime: the simulator's hooks on the CPU, which check the
    placement (inside the UB, aligned, overlapping no live buffer) and name the buffer and the core when it
    is wrong.

    ```mlir
    %raw = moe.ub_alloc %rt, %core "in.grad_expanded_x" at 0 : memref<28672xi8, #moe.ub>
    %in = memref.view %raw[%c0][] : memref<28672xi8, #moe.ub> to memref<2x7168xbf16, #moe.ub>
    ```
  }];
  let arguments = (ins LLVM_DefaultPointer:$runtime, Index:$core, StrAttr:$name, I64Attr:$offset);
  let results = (outs MemRefRankOf<[I8], [1]>:$buffer);
  let assemblyFormat = "$runtime `,` $core $name `at` $offset attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def Moe_UbFreeOp : Moe_Op<"ub_free"> {
  let summary = "Releases a buffer of the core's Unified Buffer";
  let description = [{
    ```mlir
    moe.ub_free %rt, %core "in.grad_expanded_x"
    ```
  }];
  let arguments = (ins LLVM_DefaultPointer:$runtime, Index:$core, StrAttr:$name);
  let assemblyFormat = "$runtime `,` $core $name attr-dict";
}

def Moe_DataCopyOp : Moe_Op<"data_copy", [AttrSizedOperandSegments]> {
  let summary = "Copies `count` contiguous elements between global memory and the Unified Buffer (DataCopy)";
  let description = [{
    One DataCopy of core `core`: `count` elements from `source[sourceIndices]` on, to `dest[destIndices]`
    on, along the last dim. One side is a global tensor (a `moe.view`), the other a UB buffer
    (`#moe.ub`). The simulator checks that the bytes lie inside one live buffer and one tensor of the
    launch, and counts the call and its bytes.

    ```mlir
    moe.data_copy %rt, %core, %x[%row, %off] to %in[%slot, %c0], %len : memref<?x7168xbf16>, memref<2x7168xbf16, #moe.ub>
    ```
  }];
  let arguments = (ins LLVM_DefaultPointer:$runtime, Index:$core, AnyMemRef:$source, Variadic<Index>:$sourceIndices,
                       AnyMemRef:$dest, Variadic<Index>:$destIndices, Index:$count);
  let assemblyFormat = [{
    $runtime `,` $core `,` $source `[` $sourceIndices `]` `to` $dest `[` $destIndices `]` `,` $count attr-dict
    `:` type($source) `,` type($dest)
  }];
  let hasVerifier = 1;
}

def Moe_ScalarReadOp : Moe_Op<"scalar_read"> {
  let summary = "Core `core` reads one scalar of `bytes` bytes from global memory";
  let description = [{
    Marks the scalar load from global memory that follows it (an index, a prob, an element gathered by
    an index that varies along the row): on a core, a read through the scalar unit (GetValue), not a
    DataCopy. The simulator counts it for the cost model; the load itself stays a `memref.load`.

    ```mlir
    moe.scalar_read %rt, %core, 4
    %r = memref.load %idx[%k] : memref<?xi32>
    ```
  }];
  let arguments = (ins LLVM_DefaultPointer:$runtime, Index:$core, I64Attr:$bytes);
  let assemblyFormat = "$runtime `,` $core `,` $bytes attr-dict";
}

def Moe_RowDoneOp : Moe_Op<"row_done"> {
  let summary = "Core `core` has finished row `row` of the domain";
  let description = [{
    The simulator checks that every row of a launch is finished exactly once, by the core the plan's
    split gives it.

    ```mlir
    moe.row_done %rt, %core, %row
    ```
  }];
  let arguments = (ins LLVM_DefaultPointer:$runtime, Index:$core, Index:$row);
  let assemblyFormat = "$runtime `,` $core `,` $row attr-dict";
}

#endif // MOE_OPS_TD
