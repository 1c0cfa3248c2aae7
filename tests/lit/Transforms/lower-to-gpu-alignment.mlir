// A vector access promises only the alignment its rows have: with bf16 and H = 1023 (rows of 2046 bytes,
// reachable with `moec emit --vector 8`), row r starts at r * 2046 bytes, so the promise is
// gcd(H * sizeof(T), 16) = 2 bytes, not 16 (ld.global.v4 would fault on odd rows).
// RUN: moec-opt %s --moe-lower-to-gpu | FileCheck %s

// CHECK-LABEL: gpu.func @bf16_h1023_vector8
// CHECK-NOT: alignment = 16
// CHECK: vector.load %{{.*}} {alignment = 2 : i64} : memref<?x1023xbf16>, vector<8xbf16>
// CHECK-NOT: alignment = 16
// CHECK: vector.store %{{.*}} {alignment = 2 : i64} : memref<?x1023xbf16>, vector<8xbf16>
// CHECK-NOT: alignment = 16
// CHECK: gpu.return

module attributes {moe.op = "moe_init_routing_v2_grad"} {
  func.func @bf16_h1023_vector8(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, %arg3: index, %arg4: index, %arg5: index) {
    %cst = arith.constant 0.000000e+00 : f32
    %c1023 = arith.constant 1023 : index
    %c64 = arith.constant 64 : index
    %c0 = arith.constant 0 : index
    %0 = moe.view %arg0[%arg4, %c1023] : !llvm.ptr -> memref<?x1023xbf16>
    %1 = arith.muli %arg3, %c64 : index
    %2 = moe.view %arg1[%1] : !llvm.ptr -> memref<?xi32>
    %3 = moe.view %arg2[%arg3, %c1023] : !llvm.ptr -> memref<?x1023xbf16>
    moe.compute %3[%arg3, %c1023] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 128, vector = 8, unroll = 8>} : memref<?x1023xbf16> {
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
}
