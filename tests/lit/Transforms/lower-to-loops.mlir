// moe-lower-to-loops (CPU): each kernel gains the row range [row_begin, row_end); each scheduled
// moe.compute becomes a row loop around a vector loop along the contiguous dim (vector.load /
// vector.store) and a scalar remainder loop when the vector width does not divide it; moe.sum becomes
// an unrolled f32 (or vector<V x f32>) accumulation. Input: `moec emit --emit moe` output, scheduled.
// (Sums over gathered rows as the row's value are accumulated over whole rows where moe-accumulate-rows
// marks them: see accumulate-rows.mlir; here they are not.)
// RUN: moec-opt %s --moe-lower-to-loops --moe-streaming-stores | FileCheck %s
// The pass marks the output's vector stores with the alignment they have where the output's base pointer
// is aligned (moe.streamable: only where that is 16 bytes or more); moe-streaming-stores makes them
// streaming (non-temporal) stores where it is (streaming-stores.mlir), and without it they stay cached:
// RUN: moec-opt %s --moe-lower-to-loops | FileCheck %s --check-prefix=CACHED
// CACHED-LABEL: func.func @f32_h7_k2
// CACHED-NOT: moe.streamable
// CACHED-LABEL: func.func @bf16_h16_k2
// CACHED-NOT: extract_aligned_pointer
// CACHED: vector.store %{{.*}} {alignment = 2 : i64, moe.streamable = 16 : i64} : memref<?x16xbf16>, vector<8xbf16>
// CACHED-NOT: nontemporal

// f32, H = 7, vector 4: a 4-wide main loop over [0, 4) and a scalar remainder over [4, 7). K = 2 <= unroll
// is fully unrolled: two loads, two adds, no reduction loop.
// CHECK-LABEL: func.func @f32_h7_k2
// CHECK-SAME: %[[N:arg3]]: index, %{{.*}}: index, %{{.*}}: index, %[[BEGIN:.*]]: index {moe.arg = #moe.arg<row_begin>}, %[[END:.*]]: index {moe.arg = #moe.arg<row_end>})
// CHECK: %[[OUT:.*]] = moe.view %arg2
// CHECK: %[[ROWS:.*]] = arith.muli %{{.*}}, %[[N]] : index
// CHECK: %[[LAST:.*]] = arith.minsi %[[END]], %[[ROWS]] : index
// CHECK: scf.for %[[ROW:.*]] = %[[BEGIN]] to %[[LAST]] step
// CHECK: %[[Q:.*]] = arith.divui %c7, %[[C4:.*]] : index
// CHECK: %[[MAIN:.*]] = arith.muli %[[Q]], %{{.*}} : index
// CHECK: scf.for %[[H:.*]] = %{{.*}} to %[[MAIN]] step %{{.*}} {
// CHECK-NOT: scf.for
// CHECK: vector.load %{{.*}}[%{{.*}}, %[[H]]] {alignment = 4 : i64} : memref<?x7xf32>, vector<4xf32>
// CHECK: %[[A0:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK-NOT: scf.for
// CHECK: vector.load %{{.*}}[%{{.*}}, %[[H]]] {alignment = 4 : i64} : memref<?x7xf32>, vector<4xf32>
// CHECK: %[[A1:.*]] = arith.addf %[[A0]], %{{.*}} : vector<4xf32>
// CHECK-NEXT: vector.store %[[A1]], %[[OUT]][%[[ROW]], %[[H]]] {alignment = 4 : i64} : memref<?x7xf32>, vector<4xf32>
// CHECK-NEXT: }
// CHECK: %[[TAIL:.*]] = arith.addi %[[MAIN]], %{{.*}} : index
// CHECK: scf.for %[[HS:.*]] = %[[TAIL]] to %c7 step %{{.*}} {
// CHECK: memref.load %{{.*}}[%{{.*}}, %[[HS]]] : memref<?x7xf32>
// CHECK: memref.load %{{.*}}[%{{.*}}, %[[HS]]] : memref<?x7xf32>
// CHECK: %[[S1:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: memref.store %[[S1]], %[[OUT]][%[[ROW]], %[[HS]]] : memref<?x7xf32>
// CHECK-NOT: moe.compute
// CHECK-NOT: moe.sum
// CHECK: return

// bf16, H = 1023, vector 8: 127 vectors then a 7-element remainder. K = 64 > unroll: a reduction loop
// stepping by 8 with a vector<8xf32> accumulator and 8 bf16 vector loads per trip, truncated on store.
// CHECK-LABEL: func.func @bf16_h1023_k64
// CHECK-SAME: %{{.*}}: index {moe.arg = #moe.arg<row_begin>}, %{{.*}}: index {moe.arg = #moe.arg<row_end>})
// CHECK: arith.divui %c1023, %{{.*}} : index
// CHECK: scf.for %[[H:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK: %[[SUM:.*]] = scf.for %{{.*}} = %{{.*}} to %c64 step %c8{{.*}} iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (vector<8xf32>) {
// CHECK-COUNT-8: vector.load %{{.*}}[%{{.*}}, %[[H]]] {alignment = 2 : i64} : memref<?x1023xbf16>, vector<8xbf16>
// CHECK-NOT: vector.load
// CHECK: scf.yield %{{.*}} : vector<8xf32>
// CHECK: %[[T:.*]] = arith.truncf %[[SUM]] : vector<8xf32> to vector<8xbf16>
// CHECK: vector.store %[[T]], %{{.*}}[%{{.*}}, %[[H]]] {alignment = 2 : i64} : memref<?x1023xbf16>, vector<8xbf16>
// CHECK: scf.for %[[HS:.*]] = %{{.*}} to %c1023 step
// CHECK: scf.for {{.*}} -> (f32) {
// CHECK: memref.load %{{.*}}[%{{.*}}, %[[HS]]] : memref<?x1023xbf16>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: memref.store %{{.*}}[%{{.*}}, %[[HS]]] : memref<?x1023xbf16>
// CHECK: return

// bf16, H = 16, vector 8: 8 divides 16, so there is no remainder loop. Rows of 32 bytes let the 16-byte
// vector stores be aligned when the output is: each vector store branches on the output's alignment and
// size (at least 4 MiB: 2M bf16; tested once, where the output is viewed) to an aligned streaming store or a plain
// one (the same branch every time: one loop, not a copy per kind of store). (H = 7 and 1023 above: rows are
// not 16-byte multiples, the stores stay plain.)
// CHECK-LABEL: func.func @bf16_h16_k2
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[OUT:.*]] : memref<?x16xbf16> -> index
// CHECK: %[[MIS:.*]] = arith.remui %[[BASE]], %[[C16:.*]] : index
// CHECK: %[[ISALIGNED:.*]] = arith.cmpi eq, %[[MIS]], %{{.*}} : index
// CHECK: %[[LARGE:.*]] = arith.cmpi uge, %{{.*}}, %c2097152 : index
// CHECK: %[[ALIGNED:.*]] = arith.andi %[[ISALIGNED]], %[[LARGE]] : i1
// CHECK: scf.for %[[ROW:.*]] = %arg6 to
// CHECK-NOT: scf.if
// CHECK: scf.for %[[H:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: scf.if %[[ALIGNED]] {
// CHECK-NEXT: vector.store %[[V:.*]], %[[OUT]][%[[ROW]], %[[H]]] {alignment = 16 : i64, nontemporal = true} : memref<?x16xbf16>, vector<8xbf16>
// CHECK-NEXT: } else {
// CHECK-NEXT: vector.store %[[V]], %[[OUT]][%[[ROW]], %[[H]]] {alignment = 2 : i64} : memref<?x16xbf16>, vector<8xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: return

// f16 with vector = 1: only the scalar loop over [0, 16), no vector ops.
// CHECK-LABEL: func.func @f16_h16_vector1
// CHECK-NOT: vector.
// CHECK: scf.for %[[ROW:.*]] = %arg6 to
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NOT: scf.for
// CHECK: scf.for %[[H:.*]] = %[[C0]] to %c16 step %{{.*}} {
// CHECK-NOT: vector.
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[H]]] : memref<?x16xf16>
// CHECK-NOT: vector.
// CHECK: return

module {
  func.func @f32_h7_k2(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: index, %arg4: index, %arg5: index) {
    %cst = arith.constant 0.000000e+00 : f32
    %c7 = arith.constant 7 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %0 = moe.view %arg0[%arg4, %c7] : !llvm.ptr -> memref<?x7xf32>
    %1 = arith.muli %arg3, %c2 : index
    %2 = moe.view %arg1[%1] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg2[%arg3, %c7] : !llvm.ptr -> memref<?x7xf32>
    moe.compute %3[%arg3, %c7] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 4, unroll = 8>} : memref<?x7xf32> {
    ^bb0(%arg6: index, %arg7: index):
      %4 = moe.sum %c2 : f32 {
      ^bb0(%arg8: index):
        %5 = arith.muli %arg6, %c2 : index
        %6 = arith.addi %5, %arg8 : index
        %7 = memref.load %2[%6] : memref<?xi32>
        %8 = arith.index_cast %7 : i32 to index
        %9 = arith.cmpi eq, %arg5, %c0 : index
        %10 = arith.cmpi slt, %8, %arg5 : index
        %11 = arith.ori %9, %10 : i1
        %12 = scf.if %11 -> (f32) {
          %13 = memref.load %0[%8, %arg7] : memref<?x7xf32>
          scf.yield %13 : f32
        } else {
          scf.yield %cst : f32
        }
        moe.yield %12 : f32
      }
      moe.yield %4 : f32
    }
    return
  }

  func.func @bf16_h1023_k64(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: index, %arg4: index, %arg5: index) {
    %cst = arith.constant 0.000000e+00 : f32
    %c1023 = arith.constant 1023 : index
    %c64 = arith.constant 64 : index
    %c0 = arith.constant 0 : index
    %0 = moe.view %arg0[%arg4, %c1023] : !llvm.ptr -> memref<?x1023xbf16>
    %1 = arith.muli %arg3, %c64 : index
    %2 = moe.view %arg1[%1] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg2[%arg3, %c1023] : !llvm.ptr -> memref<?x1023xbf16>
    moe.compute %3[%arg3, %c1023] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x1023xbf16> {
    ^bb0(%arg6: index, %arg7: index):
      %4 = moe.sum %c64 : f32 {
      ^bb0(%arg8: index):
        %6 = arith.muli %arg6, %c64 : index
        %7 = arith.addi %6, %arg8 : index
        %8 = memref.load %2[%7] : memref<?xi32>
        %9 = arith.index_cast %8 : i32 to index
        %10 = arith.cmpi eq, %arg5, %c0 : index
        %11 = arith.cmpi slt, %9, %arg5 : index
        %12 = arith.ori %10, %11 : i1
        %13 = scf.if %12 -> (f32) {
          %14 = memref.load %0[%9, %arg7] : memref<?x1023xbf16>
          %15 = arith.extf %14 : bf16 to f32
          scf.yield %15 : f32
        } else {
          scf.yield %cst : f32
        }
        moe.yield %13 : f32
      }
      %5 = arith.truncf %4 : f32 to bf16
      moe.yield %5 : bf16
    }
    return
  }

  func.func @bf16_h16_k2(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: index, %arg4: index, %arg5: index) {
    %cst = arith.constant 0.000000e+00 : f32
    %c16 = arith.constant 16 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %0 = moe.view %arg0[%arg4, %c16] : !llvm.ptr -> memref<?x16xbf16>
    %1 = arith.muli %arg3, %c2 : index
    %2 = moe.view %arg1[%1] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg2[%arg3, %c16] : !llvm.ptr -> memref<?x16xbf16>
    moe.compute %3[%arg3, %c16] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 8, unroll = 8>} : memref<?x16xbf16> {
    ^bb0(%arg6: index, %arg7: index):
      %4 = moe.sum %c2 : f32 {
      ^bb0(%arg8: index):
        %6 = arith.muli %arg6, %c2 : index
        %7 = arith.addi %6, %arg8 : index
        %8 = memref.load %2[%7] : memref<?xi32>
        %9 = arith.index_cast %8 : i32 to index
        %10 = arith.cmpi eq, %arg5, %c0 : index
        %11 = arith.cmpi slt, %9, %arg5 : index
        %12 = arith.ori %10, %11 : i1
        %13 = scf.if %12 -> (f32) {
          %14 = memref.load %0[%9, %arg7] : memref<?x16xbf16>
          %15 = arith.extf %14 : bf16 to f32
          scf.yield %15 : f32
        } else {
          scf.yield %cst : f32
        }
        moe.yield %13 : f32
      }
      %5 = arith.truncf %4 : f32 to bf16
      moe.yield %5 : bf16
    }
    return
  }

  func.func @f16_h16_vector1(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: index, %arg4: index, %arg5: index) {
    %cst = arith.constant 0.000000e+00 : f32
    %c16 = arith.constant 16 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %0 = moe.view %arg0[%arg4, %c16] : !llvm.ptr -> memref<?x16xf16>
    %1 = arith.muli %arg3, %c2 : index
    %2 = moe.view %arg1[%1] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg2[%arg3, %c16] : !llvm.ptr -> memref<?x16xf16>
    moe.compute %3[%arg3, %c16] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 1, unroll = 8>} : memref<?x16xf16> {
    ^bb0(%arg6: index, %arg7: index):
      %4 = moe.sum %c2 : f32 {
      ^bb0(%arg8: index):
        %6 = arith.muli %arg6, %c2 : index
        %7 = arith.addi %6, %arg8 : index
        %8 = memref.load %2[%7] : memref<?xi32>
        %9 = arith.index_cast %8 : i32 to index
        %10 = arith.cmpi eq, %arg5, %c0 : index
        %11 = arith.cmpi slt, %9, %arg5 : index
        %12 = arith.ori %10, %11 : i1
        %13 = scf.if %12 -> (f32) {
          %14 = memref.load %0[%9, %arg7] : memref<?x16xf16>
          %15 = arith.extf %14 : f16 to f32
          scf.yield %15 : f32
        } else {
          scf.yield %cst : f32
        }
        moe.yield %13 : f32
      }
      %5 = arith.truncf %4 : f32 to f16
      moe.yield %5 : f16
    }
    return
  }

}
