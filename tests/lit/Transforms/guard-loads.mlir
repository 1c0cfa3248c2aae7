// moe-guard-loads (GPU) on loops along a row whose terms may be skipped.
// @skipped_to_zero (B2's term past active_num): `live ? extf(load) : 0`; extf of a zero load is the zero the
// skipped side yields, so the load becomes a guarded one and its extf the term, with no select.
// @accumulator_passed_on (C2's unrouted expert): `skip ? acc : acc + extf(load)`; the load's guard is the
// negated condition, and a select keeps acc for a skipped term (acc + 0.0 is not acc when acc is -0.0).
// Left alone: @error_branch (the other side reports an error), @written_tensor (the kernel may write the
// tensor), @two_loads, @outside_loop (no loop along a row around the branch), @scalar_entry (below).
// RUN: moec-opt %s --moe-guard-loads | FileCheck %s
// The GPU target lowers a guarded load to a predicated ld.global.nc, its registers zeroed first (B2 with
// active_num has such a copy of its loop along the row: moe-version-row-loops).
// RUN: moec emit moe_init_routing_v2_grad --target ptx --arch sm_90 --dtype bf16 --dim H=7168 --attr top_k=8 -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// PTX:      .reg .pred %moe_p;
// PTX-NEXT: .reg .b64 %moe_a;
// PTX-NEXT: setp.ne.b32 %moe_p, %r{{[0-9]+}}, 0;
// PTX-NEXT: cvta.to.global.u64 %moe_a, %rd{{[0-9]+}};
// PTX-COUNT-4: mov.b32 %r{{[0-9]+}}, 0;
// PTX-NEXT: @%moe_p ld.global.nc.v4.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, [%moe_a];

// CHECK-LABEL: func.func @skipped_to_zero
// CHECK:       scf.for %[[H:.*]] =
// CHECK-NEXT:    %[[V:.*]] = moe.guarded_load %{{.*}}[%{{.*}}, %[[H]]] if %arg4 readonly : memref<?x64xbf16>, vector<8xbf16>
// CHECK-NEXT:    %[[T:.*]] = arith.extf %[[V]] : vector<8xbf16> to vector<8xf32>
// CHECK-NEXT:    vector.store %[[T]]
func.func @skipped_to_zero(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                           %rows: index, %row: index, %live: i1) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  scf.for %h = %c0 to %c64 step %c8 {
    %t = scf.if %live -> (vector<8xf32>) {
      %v = vector.load %x[%row, %h] : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      scf.yield %w : vector<8xf32>
    } else {
      scf.yield %zero : vector<8xf32>
    }
    vector.store %t, %out[%h] : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @accumulator_passed_on
// CHECK:       scf.for %[[H:.*]] =
// CHECK-NEXT:    %[[ACC:.*]] = vector.load
// CHECK-NEXT:    %true = arith.constant true
// CHECK-NEXT:    %[[LIVE:.*]] = arith.xori %arg4, %true : i1
// CHECK-NEXT:    %[[V:.*]] = moe.guarded_load %{{.*}}[%{{.*}}, %[[H]]] if %[[LIVE]] readonly : memref<?x64xbf16>, vector<8xbf16>
// CHECK-NEXT:    %[[W:.*]] = arith.extf %[[V]] : vector<8xbf16> to vector<8xf32>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[ACC]], %[[W]] : vector<8xf32>
// CHECK-NEXT:    arith.select %[[LIVE]], %[[S]], %[[ACC]] : vector<8xf32>
func.func @accumulator_passed_on(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                                 %rows: index, %row: index, %skip: i1) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  scf.for %h = %c0 to %c64 step %c8 {
    %acc = vector.load %out[%h] : memref<64xf32>, vector<8xf32>
    %t = scf.if %skip -> (vector<8xf32>) {
      scf.yield %acc : vector<8xf32>
    } else {
      %v = vector.load %x[%row, %h] : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      %s = arith.addf %acc, %w : vector<8xf32>
      scf.yield %s : vector<8xf32>
    }
    vector.store %t, %out[%h] : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @error_branch
// CHECK-NOT:   moe.guarded_load
// CHECK:       memref.store
func.func @error_branch(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                        %sp: !llvm.ptr {llvm.noalias, moe.arg = "status"}, %rows: index, %row: index, %inside: i1) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1 : i64
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  %status = moe.view %sp[%c2] : !llvm.ptr -> memref<2xi64>
  scf.for %h = %c0 to %c64 step %c8 {
    %t = scf.if %inside -> (vector<8xf32>) {
      %v = vector.load %x[%row, %h] : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      scf.yield %w : vector<8xf32>
    } else {
      memref.store %one, %status[%c0] : memref<2xi64>
      scf.yield %zero : vector<8xf32>
    }
    vector.store %t, %out[%h] : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @written_tensor
// CHECK-NOT:   moe.guarded_load
// CHECK:       return
func.func @written_tensor(%xp: !llvm.ptr {llvm.noalias}, %op: !llvm.ptr {llvm.noalias},
                          %rows: index, %row: index, %live: i1) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  scf.for %h = %c0 to %c64 step %c8 {
    %t = scf.if %live -> (vector<8xf32>) {
      %v = vector.load %x[%row, %h] : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      scf.yield %w : vector<8xf32>
    } else {
      scf.yield %zero : vector<8xf32>
    }
    vector.store %t, %out[%h] : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @two_loads
// CHECK-NOT:   moe.guarded_load
// CHECK:       return
func.func @two_loads(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                     %rows: index, %row: index, %live: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  scf.for %h = %c0 to %c64 step %c8 {
    %t = scf.if %live -> (vector<8xf32>) {
      %v = vector.load %x[%row, %h] : memref<?x64xbf16>, vector<8xbf16>
      %next = arith.addi %row, %c1 : index
      %u = vector.load %x[%next, %h] : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      %y = arith.extf %u : vector<8xbf16> to vector<8xf32>
      %s = arith.addf %w, %y : vector<8xf32>
      scf.yield %s : vector<8xf32>
    } else {
      scf.yield %zero : vector<8xf32>
    }
    vector.store %t, %out[%h] : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @outside_loop
// CHECK-NOT:   moe.guarded_load
// CHECK:       return
func.func @outside_loop(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                        %rows: index, %row: index, %live: i1) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  %t = scf.if %live -> (vector<8xf32>) {
    %v = vector.load %x[%row, %c0] : memref<?x64xbf16>, vector<8xbf16>
    %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
    scf.yield %w : vector<8xf32>
  } else {
    scf.yield %zero : vector<8xf32>
  }
  vector.store %t, %out[%c0] : memref<64xf32>, vector<8xf32>
  return
}

// A scalar load (a warp list's entry, past the range for some lanes) stays behind its branch.
// CHECK-LABEL: func.func @scalar_entry
// CHECK-NOT:   moe.guarded_load
// CHECK:       return
func.func @scalar_entry(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                        %rows: index, %row: index, %lane: index) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %false = arith.constant false
  %zero = arith.constant 0 : i32
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xi32>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xi32>
  scf.for %k = %c0 to %c64 step %c32 {
    %at = arith.addi %k, %lane : index
    %inside = arith.cmpi ult, %at, %c64 : index
    %e = scf.if %inside -> (i32) {
      %v = memref.load %x[%row, %at] : memref<?x64xi32>
      scf.yield %v : i32
    } else {
      scf.yield %zero : i32
    }
    memref.store %e, %out[%k] : memref<64xi32>
  }
  return
}
