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

#endif // MOE_DIALECT_TD
