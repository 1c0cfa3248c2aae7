// The facts passes hand to each other are declared attributes (MoeDialect.td: discardableAttrs, #moe.arg),
// checked for their type and for what they sit on (MoeAttrVerifiers.cpp): each case below is one error, and
// the first shows the forms that verify and print back unchanged.
// RUN: moec-opt %s -verify-diagnostics -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @roles
// CHECK-SAME: (%{{.*}}: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">, moe.unique}, %{{.*}}: !llvm.ptr {moe.arg = #moe.arg<status>},
// CHECK-SAME: %{{.*}}: index {moe.arg = #moe.arg<dim, "H">}, %{{.*}}: index {moe.arg = #moe.arg<row_begin>}, %{{.*}}: f32)
// CHECK: arith.truncf %{{.*}} {moe.exact_rounding} : f32 to bf16
// CHECK: scf.for {{.*}} {
// CHECK: } {moe.lane_loop}
// CHECK: scf.for {{.*}} iter_args
// CHECK: } {moe.lane_sum}
module attributes {moe.op = "op", moe.dtype = "bf16", moe.workspace = ["out"]} {
  func.func @roles(%x: !llvm.ptr {moe.arg = #moe.arg<tensor, "x">, moe.unique}, %s: !llvm.ptr {moe.arg = #moe.arg<status>},
                   %h: index {moe.arg = #moe.arg<dim, "H">}, %b: index {moe.arg = #moe.arg<row_begin>}, %f: f32) {
    %r = arith.truncf %f {moe.exact_rounding} : f32 to bf16
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %h step %c1 {
    } {moe.lane_loop}
    %sum = scf.for %i = %c0 to %h step %c1 iter_args(%acc = %f) -> (f32) {
      scf.yield %acc : f32
    } {moe.lane_sum}
    return
  }
}

// -----

// expected-error @+1 {{argument 0: 'moe.arg' needs the name of its tensor}}
func.func @tensor_without_name(%x: !llvm.ptr {moe.arg = #moe.arg<tensor>}) {
  return
}

// -----

// expected-error @+1 {{argument 0: 'moe.arg' takes no name for its status}}
func.func @status_with_name(%x: !llvm.ptr {moe.arg = #moe.arg<status, "s">}) {
  return
}

// -----

// expected-error @+1 {{argument 0: 'moe.arg' a dim is an index, not '!llvm.ptr'}}
func.func @dim_as_pointer(%x: !llvm.ptr {moe.arg = #moe.arg<dim, "H">}) {
  return
}

// -----

// expected-error @+1 {{argument 0: 'moe.arg' must be a #moe.arg}}
func.func @role_as_text(%x: !llvm.ptr {moe.arg = "tensor:x"}) {
  return
}

// -----

// expected-error @+1 {{argument 0: 'moe.unique' is a unit attribute on a tensor argument}}
func.func @unique_dim(%h: index {moe.arg = #moe.arg<dim, "H">, moe.unique}) {
  return
}

// -----

// expected-error @+1 {{argument 0: 'moe.uniq' is not an argument attribute of the moe dialect}}
func.func @misspelled_argument_attribute(%x: !llvm.ptr {moe.uniq}) {
  return
}

// -----

func.func @misspelled(%f: f32) {
  // expected-error @+1 {{'arith.truncf' op 'moe.exact_roundings' is not an attribute of the moe dialect}}
  %r = arith.truncf %f {moe.exact_roundings} : f32 to bf16
  return
}

// -----

func.func @lane_loop_on_an_if(%p: i1) {
  // expected-error @+1 {{'scf.if' op 'moe.lane_loop' belongs on an scf.for}}
  scf.if %p {
  } {moe.lane_loop}
  return
}

// -----

func.func @lane_sum_without_sums(%h: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'scf.for' op 'moe.lane_sum' belongs on an scf.for that yields partial sums}}
  scf.for %i = %c0 to %h step %c1 {
  } {moe.lane_sum}
  return
}

// -----

func.func @exact_rounding_not_unit(%f: f32) {
  // expected-error @+1 {{'arith.truncf' op 'moe.exact_rounding' must be a unit attribute}}
  %r = arith.truncf %f {moe.exact_rounding = 1 : i64} : f32 to bf16
  return
}

// -----

func.func @row_group_on_a_function() attributes {moe.row_group} {
  // expected-error @-1 {{'func.func' op 'moe.row_group' belongs on a moe.compute or moe.scatter}}
  return
}

// -----

func.func @point_rows_on_a_function() attributes {moe.point_rows = 8 : i64} {
  // expected-error @-1 {{'func.func' op 'moe.point_rows' belongs on a moe.compute or moe.scatter}}
  return
}

// -----

func.func @point_rows_batch_of_3(%out: memref<?xf32>, %n: index) {
  // expected-error @+1 {{'moe.compute' op 'moe.point_rows' must be the points run together, a power of two from 2 to 32}}
  moe.compute %out[%n] {moe.point_rows = 3 : i64} : memref<?xf32> {
  ^bb0(%i: index):
    %z = arith.constant 0.0 : f32
    moe.yield %z : f32
  }
  return
}

// -----

func.func @accumulated_row_on_a_compute(%out: memref<?xf32>, %n: index) {
  // expected-error @+1 {{'moe.compute' op 'moe.accumulated_row' belongs on a moe.fold or moe.sum}}
  moe.compute %out[%n] {moe.accumulated_row} : memref<?xf32> {
  ^bb0(%i: index):
    %z = arith.constant 0.0 : f32
    moe.yield %z : f32
  }
  return
}

// -----

func.func @interleaved_points_of_9(%out: memref<?xf32>, %n: index) {
  // expected-error @+1 {{'moe.compute' op 'moe.interleaved_points' must be the points whose dot products run together, 2 to 8}}
  moe.compute %out[%n] {moe.interleaved_points = 9 : i64} : memref<?xf32> {
  ^bb0(%i: index):
    %z = arith.constant 0.0 : f32
    moe.yield %z : f32
  }
  return
}

// -----

func.func @interleaved_points_on_a_function() attributes {moe.interleaved_points = 4 : i64} {
  // expected-error @-1 {{'func.func' op 'moe.interleaved_points' belongs on a moe.compute or moe.scatter}}
  return
}

// -----

func.func @compress_lanes_of_12(%n: index) {
  %c8 = arith.constant 8 : index
  // expected-error @+1 {{'moe.compact' op 'moe.compress_lanes' must be the entries tested at a time, a power of two from 2 to 64}}
  %list, %count = moe.compact %c8 {moe.compress_lanes = 12 : i64} : memref<8xi32> {
  ^bb0(%e: index):
    %live = arith.cmpi ult, %e, %n : index
    moe.yield %live : i1
  }
  return
}

// -----

func.func @compress_lanes_on_a_compute(%out: memref<?xf32>, %n: index) {
  // expected-error @+1 {{'moe.compute' op 'moe.compress_lanes' belongs on a moe.compact}}
  moe.compute %out[%n] {moe.compress_lanes = 16 : i64} : memref<?xf32> {
  ^bb0(%i: index):
    %z = arith.constant 0.0 : f32
    moe.yield %z : f32
  }
  return
}

// -----

func.func @point_rows_unit(%out: memref<?xf32>, %n: index) {
  // expected-error @+1 {{'moe.compute' op 'moe.point_rows' must be the points run together, a power of two from 2 to 32}}
  moe.compute %out[%n] {moe.point_rows} : memref<?xf32> {
  ^bb0(%i: index):
    %z = arith.constant 0.0 : f32
    moe.yield %z : f32
  }
  return
}

// -----

func.func @dead_value_of_another_type(%out: memref<?xbf16>, %n: index) {
  // expected-error @+1 {{'moe.compute' op 'moe.dead_value' must be a constant of the output's element type 'bf16'}}
  moe.compute %out[%n] {moe.dead_value = 0.0 : f32} : memref<?xbf16> {
  ^bb0(%i: index):
    %z = arith.constant 0.0 : bf16
    moe.yield %z : bf16
  }
  return
}

// -----

func.func @rows_per_block_zero() attributes {moe.rows_per_block = 0 : i64} {
  // expected-error @-1 {{'func.func' op 'moe.rows_per_block' must be a positive integer}}
  return
}

// -----

// expected-error @+1 {{'builtin.module' op 'moe.workspace' must be a non-empty list of output names}}
module attributes {moe.workspace = []} {
}

// -----

// expected-error @+1 {{'func.func' op 'moe.op' belongs on the module}}
func.func @op_on_a_function() attributes {moe.op = "x"} {
  return
}

// -----

func.func @streamable_on_a_load(%m: memref<64xf32>, %i: index) -> vector<16xf32> {
  // expected-error @+1 {{'vector.load' op 'moe.streamable' belongs on a vector.store}}
  %v = vector.load %m[%i] {moe.streamable = 64 : i64} : memref<64xf32>, vector<16xf32>
  return %v : vector<16xf32>
}

// -----

func.func @streamable_below_16_bytes(%m: memref<64xf32>, %i: index, %v: vector<2xf32>) {
  // expected-error @+1 {{'vector.store' op 'moe.streamable' must be a power of two of at least 16 (bytes)}}
  vector.store %v, %m[%i] {moe.streamable = 8 : i64} : memref<64xf32>, vector<2xf32>
  return
}

// -----

func.func @streamable_not_a_power_of_two(%m: memref<64xf32>, %i: index, %v: vector<16xf32>) {
  // expected-error @+1 {{'vector.store' op 'moe.streamable' must be a power of two of at least 16 (bytes)}}
  vector.store %v, %m[%i] {moe.streamable = 48 : i64} : memref<64xf32>, vector<16xf32>
  return
}

// -----

func.func @step_table_on_a_compute(%y: memref<?x64xf32>, %t: index) {
  %c64 = arith.constant 64 : index
  %cst = arith.constant 0.000000e+00 : f32
  // expected-error @+1 {{'moe.compute' op 'moe.step_table' belongs on a moe.fold of a domain's body}}
  moe.compute %y[%t, %c64] {moe.step_table, schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
  ^bb0(%n: index, %h: index):
    moe.yield %cst : f32
  }
  return
}

// -----

func.func @step_table_inside_a_fold(%y: memref<?x64xf32>, %t: index) {
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %cst = arith.constant 0.000000e+00 : f32
  moe.compute %y[%t, %c64] {schedule = #moe.schedule<rowsPerBlock = 4, threads = 32, vector = 4, unroll = 8>} : memref<?x64xf32> {
  ^bb0(%n: index, %h: index):
    %outer = moe.fold %c8, %cst : f32 {
    ^bb0(%k: index, %acc: f32):
      // expected-error @+1 {{'moe.fold' op 'moe.step_table' belongs on a moe.fold of a domain's body}}
      %inner = moe.fold %c8, %acc {moe.step_table} : f32 {
      ^bb0(%j: index, %a: f32):
        moe.yield %a : f32
      }
      moe.yield %inner : f32
    }
    moe.yield %outer : f32
  }
  return
}
