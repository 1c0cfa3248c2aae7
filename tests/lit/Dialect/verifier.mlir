// The moe ops' verifiers: each case is one error.
// RUN: moec-opt %s -verify-diagnostics -split-input-file -o /dev/null

func.func @view_too_few_sizes(%p: !llvm.ptr, %n: index) {
  // expected-error @+1 {{'moe.view' op has 1 sizes for a rank-2 view}}
  %v = moe.view %p[%n] : !llvm.ptr -> memref<?x?xf32>
  return
}

// -----

func.func @view_too_many_sizes(%p: !llvm.ptr, %n: index) {
  // expected-error @+1 {{'moe.view' op has 3 sizes for a rank-2 view}}
  %v = moe.view %p[%n, %n, %n] : !llvm.ptr -> memref<?x?xf32>
  return
}

// -----

func.func @view_not_a_ptr(%p: i64, %n: index) {
  // expected-error @+1 {{'moe.view' op expects a bare !llvm.ptr, got 'i64'}}
  %v = moe.view %p[%n] : i64 -> memref<?xf32>
  return
}

// -----

func.func @view_constant_size_disagrees(%p: !llvm.ptr, %n: index) {
  %c8 = arith.constant 8 : index
  // expected-error @+1 {{'moe.view' op dim 1 is 16 in the type but the size is 8}}
  %v = moe.view %p[%n, %c8] : !llvm.ptr -> memref<?x16xf32>
  return
}

// -----

func.func @view_strided(%p: !llvm.ptr, %n: index) {
  // expected-error @+1 {{'moe.view' op views are row-major: the result must have the identity layout}}
  %v = moe.view %p[%n, %n] : !llvm.ptr -> memref<?x?xf32, strided<[1, ?]>>
  return
}

// -----

func.func @compute_bounds_rank(%p: !llvm.ptr, %n: index) {
  %v = moe.view %p[%n, %n] : !llvm.ptr -> memref<?x?xf32>
  // expected-error @+1 {{'moe.compute' op has 1 bounds for a rank-2 output}}
  moe.compute %v[%n] : memref<?x?xf32> {
  ^bb0(%i: index):
    %c = arith.constant 0.0 : f32
    moe.yield %c : f32
  }
  return
}

// -----

func.func @compute_body_args(%p: !llvm.ptr, %n: index) {
  %v = moe.view %p[%n, %n] : !llvm.ptr -> memref<?x?xf32>
  // expected-error @+1 {{'moe.compute' op body takes 1 indices, expected 2}}
  moe.compute %v[%n, %n] : memref<?x?xf32> {
  ^bb0(%i: index):
    %c = arith.constant 0.0 : f32
    moe.yield %c : f32
  }
  return
}

// -----

func.func @compute_body_arg_type(%p: !llvm.ptr, %n: index) {
  %v = moe.view %p[%n] : !llvm.ptr -> memref<?xf32>
  // expected-error @+1 {{'moe.compute' op body arguments must be index, got 'i32'}}
  moe.compute %v[%n] : memref<?xf32> {
  ^bb0(%i: i32):
    %c = arith.constant 0.0 : f32
    moe.yield %c : f32
  }
  return
}

// -----

func.func @compute_yield_type(%p: !llvm.ptr, %n: index) {
  %v = moe.view %p[%n, %n] : !llvm.ptr -> memref<?x?xbf16>
  // expected-error @+1 {{'moe.compute' op body yields 'f32', expected 'bf16'}}
  moe.compute %v[%n, %n] : memref<?x?xbf16> {
  ^bb0(%i: index, %j: index):
    %c = arith.constant 0.0 : f32
    moe.yield %c : f32
  }
  return
}

// -----

func.func @sum_body_not_f32(%k: index) -> f32 {
  // expected-error @+1 {{'moe.sum' op body yields 'f16', expected 'f32'}}
  %s = moe.sum %k : f32 {
  ^bb0(%i: index):
    %c = arith.constant 0.0 : f16
    moe.yield %c : f16
  }
  return %s : f32
}

// -----

func.func @sum_body_args(%k: index) -> f32 {
  // expected-error @+1 {{'moe.sum' op body takes 2 indices, expected 1}}
  %s = moe.sum %k : f32 {
  ^bb0(%i: index, %j: index):
    %c = arith.constant 0.0 : f32
    moe.yield %c : f32
  }
  return %s : f32
}

// -----

func.func @sum_result_not_f32(%k: index) -> f16 {
  // expected-error @+1 {{result #0 must be 32-bit float}}
  %s = moe.sum %k : f16 {
  ^bb0(%i: index):
    %c = arith.constant 0.0 : f32
    moe.yield %c : f32
  }
  return %s : f16
}

// -----

func.func @param_bad_type() {
  // expected-error @+1 {{result #0 must be index or 1-bit signless integer}}
  %p = moe.param "H" : i32
  return
}

// -----

func.func @yield_outside(%x: f32) {
  // expected-error @+1 {{'moe.yield' op expects parent op to be one of 'moe.compute, moe.sum, moe.fold, moe.compact'}}
  moe.yield %x : f32
}

// -----

func.func @bad_schedule(%p: !llvm.ptr, %n: index) {
  %v = moe.view %p[%n] : !llvm.ptr -> memref<?xf32>
  // expected-error @+1 {{expected ','}}
  moe.compute %v[%n] {schedule = #moe.schedule<rowsPerBlock = 1, threads = 1, vector = 1>} : memref<?xf32> {
  ^bb0(%i: index):
    %c = arith.constant 0.0 : f32
    moe.yield %c : f32
  }
  return
}

// -----

func.func @row_store_not_along_the_sum(%out: memref<?x8xf32>, %row: index, %n: index) {
  %s = moe.sum %n : f32 {
  ^bb0(%j: index):
    %x = arith.constant 1.0 : f32
    // expected-error @+1 {{'moe.row_store' op must store along its moe.sum's index (its last index)}}
    moe.row_store %x to %out[%j, %row] : f32, memref<?x8xf32>
    moe.yield %x : f32
  }
  return
}

// -----

func.func @row_store_wrong_element(%out: memref<?x8xbf16>, %row: index, %n: index) {
  %s = moe.sum %n : f32 {
  ^bb0(%j: index):
    %x = arith.constant 1.0 : f32
    // expected-error @+1 {{'moe.row_store' op stores 'f32' into 'memref<?x8xbf16>'}}
    moe.row_store %x to %out[%row, %j] : f32, memref<?x8xbf16>
    moe.yield %x : f32
  }
  return
}

// -----

func.func @row_store_outside_a_sum(%out: memref<?x8xf32>, %row: index, %x: f32) {
  // expected-error @+1 {{'moe.row_store' op expects parent op 'moe.sum'}}
  moe.row_store %x to %out[%row, %row] : f32, memref<?x8xf32>
  return
}

// -----

func.func @guarded_load_wrong_index_count(%x: memref<?x64xbf16>, %i: index, %p: i1) {
  // expected-error @+1 {{'moe.guarded_load' op needs 2 indices for 'memref<?x64xbf16>', got 1}}
  %v = moe.guarded_load %x[%i] if %p : memref<?x64xbf16>, vector<8xbf16>
  return
}

// -----

func.func @guarded_load_other_element(%x: memref<?x64xbf16>, %i: index, %p: i1) {
  // expected-error @+1 {{'moe.guarded_load' op loads 'vector<4xf32>' from 'memref<?x64xbf16>'}}
  %v = moe.guarded_load %x[%i, %i] if %p : memref<?x64xbf16>, vector<4xf32>
  return
}

// -----

func.func @guarded_load_odd_size(%x: memref<?x64xbf16>, %i: index, %p: i1) {
  // expected-error @+1 {{'moe.guarded_load' op loads 4, 8 or 16 bytes (a scalar: 2 or 4), got 6}}
  %v = moe.guarded_load %x[%i, %i] if %p : memref<?x64xbf16>, vector<3xbf16>
  return
}

// -----

func.func @guarded_load_two_byte_vector(%x: memref<?x64xbf16>, %i: index, %p: i1) {
  // expected-error @+1 {{'moe.guarded_load' op loads 4, 8 or 16 bytes (a scalar: 2 or 4), got 2}}
  %v = moe.guarded_load %x[%i, %i] if %p : memref<?x64xbf16>, vector<1xbf16>
  return
}

// -----

func.func @guarded_store_other_element(%x: memref<?x64xbf16>, %v: vector<4xf32>, %i: index, %p: i1) {
  // expected-error @+1 {{'moe.guarded_store' op stores 'vector<4xf32>' to 'memref<?x64xbf16>'}}
  moe.guarded_store %v, %x[%i, %i] if %p : memref<?x64xbf16>, vector<4xf32>
  return
}

// -----

func.func @guarded_store_odd_size(%x: memref<?x64xbf16>, %v: vector<3xbf16>, %i: index, %p: i1) {
  // expected-error @+1 {{'moe.guarded_store' op stores 4, 8 or 16 bytes (a scalar: 2 or 4), got 6}}
  moe.guarded_store %v, %x[%i, %i] if %p : memref<?x64xbf16>, vector<3xbf16>
  return
}
