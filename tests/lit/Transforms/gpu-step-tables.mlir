// moe-lower-to-gpu's step tables on C2 weighted (f32, E = 8, K = 2, H = 64; the IR `moec emit --target ptx
// --emit moe` prints). Each step of the fold over the experts reads the token's rowmap entry, tests it and,
// in the branch of a live entry, checks it and loads the row's prob: work that does not vary along the row.
// Where moe-step-tables marks the fold (moe.step_table) the row's prologue does it once per step, each warp's lanes taking the
// steps, into shared-memory columns (the entry, as the i32 it was loaded as; the tests, as 32-bit words;
// the prob; each buffer 16-byte aligned, as LLVM assumes where it reads entries as a vector), the branch's part
// under the branch's condition; the loop along the row reads the columns.
// The check's report of a bad entry before the gathered row's load stays in the loop's branch (it only
// reports). The check's column is also summed up, per warp, as "inside at every step" (vote.sync all), and the
// loop reads the check or'ed with it: moe-version-row-loops then gives the loop a copy without the check's
// branch for the rows where it holds. An unrouted expert's step does not run the check: its column holds true
// there, so a row with unrouted experts (every row at top-2 of 8) still takes that copy, and the vote is false
// only where a step that runs the check fails it (moe.exact_check_vote: a row that takes the original loop then
// has an error to report, and moe-version-row-loops makes that loop only report). Without the mark,
// every vector of the row reloads the entry and the prob.
// RUN: moec-opt %s --moe-step-tables --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=TABLES
// RUN: moec-opt %s --moe-lower-to-gpu --canonicalize | FileCheck %s --check-prefix=PLAIN

// TABLES: gpu.func @moe_unpermute__0_hidden_states({{.*}}) workgroup(%[[ROW:arg[0-9]+]] : memref<32xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[DEAD:arg[0-9]+]] : memref<32xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[INSIDE:arg[0-9]+]] : memref<32xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[PROB:arg[0-9]+]] : memref<32xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// TABLES: scf.for {{.*}} to %c8 step %c32 iter_args({{.*}} = %true) -> (i1) {
// TABLES: memref.load {{.*}} : memref<?x8xi32>
// TABLES: scf.if {{.*}} -> (i1, f32) {
// TABLES-NEXT: scf.yield %true, %{{.*}} : i1, f32
// TABLES: memref.load {{.*}} : memref<?xf32>
// TABLES: memref.store {{.*}}, %[[ROW]]
// TABLES: memref.store {{.*}}, %[[DEAD]]
// TABLES: memref.store {{.*}}, %[[INSIDE]]
// TABLES: memref.store {{.*}}, %[[PROB]]
// TABLES: nvvm.bar.warp.sync
// TABLES: %[[ALL:.*]] = nvvm.vote.sync  all %{{.*}}, %{{.*}} {moe.exact_check_vote} -> i1
// TABLES: scf.for {{.*}} to %c64 step %c128 {
// TABLES-NOT: memref.load {{.*}} : memref<?x8xi32>
// TABLES-NOT: memref.load {{.*}} : memref<?xf32>
// TABLES: memref.load %[[ROW]]
// TABLES: arith.index_cast {{.*}} : i32 to index
// TABLES: memref.load %[[INSIDE]]
// TABLES-NEXT: %[[BIT:.*]] = arith.trunci
// TABLES-NEXT: arith.ori %[[ALL]], %[[BIT]] : i1
// TABLES: memref.load %[[PROB]]
// TABLES: vector.load
// TABLES-NOT: memref.load {{.*}} : memref<?x8xi32>
// TABLES-NOT: memref.load {{.*}} : memref<?xf32>
// TABLES: gpu.return

// PLAIN: gpu.func @moe_unpermute__0_hidden_states
// PLAIN-NOT: workgroup
// PLAIN: scf.for {{.*}} to %c64 step %c128 {
// PLAIN: memref.load {{.*}} : memref<?x8xi32>
// PLAIN: vector.load
// PLAIN: memref.load {{.*}} : memref<?xf32>
// PLAIN: gpu.return

module attributes {moe.dtype = "f32", moe.op = "moe_unpermute"} {
  func.func @moe_unpermute__0_hidden_states(%arg0: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "hidden_states_unzipped">}, %arg1: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "zipped_expertwise_rowmap">}, %arg2: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "expert_routemap_topk">}, %arg3: !llvm.ptr {llvm.noalias, llvm.readonly, moe.arg = #moe.arg<tensor, "token_prob_unzipped">}, %arg4: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "hidden_states">}, %arg5: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<tensor, "expert_prob_topk">}, %arg6: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %arg7: index {moe.arg = #moe.arg<dim, "R">}, %arg8: index {moe.arg = #moe.arg<dim, "Tk">}, %arg9: index {moe.arg = #moe.arg<attr, "total_zipped_tokens">}) {
    %c3 = arith.constant 3 : index
    %c2 = arith.constant 2 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %0 = moe.view %arg4[%arg8, %c64] : !llvm.ptr -> memref<?x64xf32>
    %1 = moe.view %arg1[%arg8, %c8] : !llvm.ptr -> memref<?x8xi32>
    %2 = moe.view %arg0[%arg7, %c64] : !llvm.ptr -> memref<?x64xf32>
    %3 = moe.view %arg6[%c4] : !llvm.ptr -> memref<4xi64>
    %4 = moe.view %arg3[%arg7] : !llvm.ptr -> memref<?xf32>
    moe.compute %0[%arg8, %c64] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
    ^bb0(%arg10: index, %arg11: index):
      %5 = moe.fold %c8, %cst : f32 {
      ^bb0(%arg12: index, %arg13: f32):
        %6 = memref.load %1[%arg10, %arg12] : memref<?x8xi32>
        %7 = arith.index_cast %6 : i32 to index
        %8 = arith.cmpi slt, %7, %c0 : index
        %9 = scf.if %8 -> (f32) {
          scf.yield %arg13 : f32
        } else {
          %10 = arith.cmpi sge, %7, %c0 : index
          %11 = arith.cmpi slt, %7, %arg7 : index
          %12 = arith.andi %10, %11 : i1
          %13 = scf.if %12 -> (f32) {
            %19 = memref.load %2[%7, %arg11] : memref<?x64xf32>
            scf.yield %19 : f32
          } else {
            %19 = arith.cmpi slt, %7, %c0 : index
            %20 = arith.cmpi sge, %7, %arg7 : index
            %21 = arith.ori %19, %20 : i1
            %22 = arith.select %21, %c1, %c0 : index
            %23 = arith.select %21, %7, %c0 : index
            %24 = arith.index_cast %22 : index to i64
            memref.store %24, %3[%c0] : memref<4xi64>
            %25 = arith.index_cast %23 : index to i64
            memref.store %25, %3[%c1] : memref<4xi64>
            scf.yield %cst : f32
          }
          %14 = arith.cmpi sge, %7, %c0 : index
          %15 = arith.cmpi slt, %7, %arg7 : index
          %16 = arith.andi %14, %15 : i1
          %17 = scf.if %16 -> (f32) {
            %19 = memref.load %4[%7] : memref<?xf32>
            scf.yield %19 : f32
          } else {
            %19 = arith.cmpi slt, %7, %c0 : index
            %20 = arith.cmpi sge, %7, %arg7 : index
            %21 = arith.ori %19, %20 : i1
            %22 = arith.select %21, %c1, %c0 : index
            %23 = arith.select %21, %7, %c0 : index
            %24 = arith.index_cast %22 : index to i64
            memref.store %24, %3[%c2] : memref<4xi64>
            %25 = arith.index_cast %23 : index to i64
            memref.store %25, %3[%c3] : memref<4xi64>
            scf.yield %cst : f32
          }
          %18 = math.fma %13, %17, %arg13 : f32
          scf.yield %18 : f32
        }
        moe.yield %9 : f32
      }
      moe.yield %5 : f32
    }
    return
  }
}
