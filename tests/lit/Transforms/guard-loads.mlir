// moe-guard-loads (GPU) on loops along a row whose terms may be skipped.
// @skipped_to_zero (B2's term past active_num): `live ? extf(load) : 0`; extf of a zero load is the zero the
// skipped side yields, so the load becomes a guarded one and its extf the term, with no select.
// @accumulator_passed_on (C2's unrouted expert): `skip ? acc : acc + extf(load)`; the load's guard is the
// negated condition, and the term's arithmetic stays behind a branch that passes acc on for a skipped term
// (acc + 0.0 is not acc when acc is -0.0; a select would run the arithmetic of every skipped term too).
// @two_terms: the second term's load (and its row's index) moves before the first term's branch, so that
// the loads of all terms issue before any waits. @write_between: a store between the two terms keeps the
// second term's load (and the reads it needs) after it.
// @summed_term (B2's active_num): `acc + (live ? extf(load) : 0)` where acc starts at +0.0: a sum never -0.0
// is unchanged by a skipped term's +0.0, so the add goes behind the branch with the extf. @summed_unknown:
// the same term added to a value that may be -0.0 (a loaded one) keeps the add unconditional.
// @point_with_store (a point of A3's batch of dot products, active or not): the term also loads the point's
// prob (a scalar, guarded too) and writes its row where the point has one: the store is guarded by both
// conditions. @store_branch: a branch in the loop that only stores becomes a guarded store.
// Left alone: @error_branch (the other side reports an error), @written_tensor (the kernel may write the
// tensor), @two_loads, @outside_loop (no loop along a row around the branch), @scalar_entry (below),
// @scalar_store_branch (a scalar store), @unaligned_term (a vector load that promises less than its size: a row
// that starts mid-vector; a guarded load moves the vector as one access).
// RUN: moec-opt %s --moe-guard-loads | FileCheck %s
// The GPU target lowers a guarded load to a predicated ld.global.nc, its registers zeroed first, at a global
// address with no cvta (B2 with active_num has such a copy of its loop along the row: moe-version-row-loops).
// RUN: moec emit moe_init_routing_v2_grad --target ptx --arch sm_90 --dtype bf16 --dim H=7168 --attr top_k=8 -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// PTX:      .reg .pred %moe_p;
// PTX-NEXT: setp.ne.b32 %moe_p, %r{{[0-9]+}}, 0;
// PTX-COUNT-4: mov.b32 %r{{[0-9]+}}, 0;
// PTX-NEXT: @%moe_p ld.global.nc.v4.b32 {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, [%rd{{[0-9]+}}];
// A guarded store is a predicated st.global; a bf16 scalar load moves a 16-bit register (A3's drop-and-pad
// probs kernel: a batch's points each load their prob and write their row under the point's flag).
// RUN: moec emit moe_token_unpermute_with_routing_map_grad --target ptx --arch sm_90 --dtype bf16 --dim H=512 --dim E=8 --attr drop_and_pad=1 --with permuted_tokens --with probs -o %t.a3.ptx
// RUN: FileCheck %s --check-prefix=STORE < %t.a3.ptx
// STORE:      mov.b16 %rs{{[0-9]+}}, 0;
// STORE-NEXT: @%moe_p ld.global.nc.b16 %rs{{[0-9]+}}, [%rd{{[0-9]+}}];
// STORE:      @%moe_p st.global.v4.b32 [%rd{{[0-9]+}}], {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}};

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
      %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      scf.yield %w : vector<8xf32>
    } else {
      scf.yield %zero : vector<8xf32>
    }
    vector.store %t, %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @accumulator_passed_on
// CHECK:       scf.for %[[H:.*]] =
// CHECK-NEXT:    %[[ACC:.*]] = vector.load
// CHECK-NEXT:    %true = arith.constant true
// CHECK-NEXT:    %[[LIVE:.*]] = arith.xori %arg4, %true : i1
// CHECK-NEXT:    %[[V:.*]] = moe.guarded_load %{{.*}}[%{{.*}}, %[[H]]] if %[[LIVE]] readonly : memref<?x64xbf16>, vector<8xbf16>
// CHECK-NEXT:    %[[T:.*]] = scf.if %[[LIVE]] -> (vector<8xf32>) {
// CHECK-NEXT:      %[[W:.*]] = arith.extf %[[V]] : vector<8xbf16> to vector<8xf32>
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[W]] : vector<8xf32>
// CHECK-NEXT:      scf.yield %[[S]] : vector<8xf32>
// CHECK-NEXT:    } else {
// CHECK-NEXT:      scf.yield %[[ACC]] : vector<8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    vector.store %[[T]]
// CHECK-NOT:     arith.select
func.func @accumulator_passed_on(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                                 %rows: index, %row: index, %skip: i1) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  scf.for %h = %c0 to %c64 step %c8 {
    %acc = vector.load %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
    %t = scf.if %skip -> (vector<8xf32>) {
      scf.yield %acc : vector<8xf32>
    } else {
      %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      %s = arith.addf %acc, %w : vector<8xf32>
      scf.yield %s : vector<8xf32>
    }
    vector.store %t, %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @two_terms
// CHECK:       scf.for %[[H:.*]] =
// CHECK:         %[[V0:.*]] = moe.guarded_load %{{.*}}[%arg3, %[[H]]] if %{{.*}} readonly
// CHECK:         %[[R1:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:         %[[V1:.*]] = moe.guarded_load %{{.*}}[%[[R1]], %[[H]]] if %{{.*}} readonly
// CHECK-NEXT:    %[[T0:.*]] = scf.if
// CHECK:         %[[T1:.*]] = scf.if
// CHECK:           arith.extf %[[V1]]
// CHECK:         vector.store %[[T1]]
func.func @two_terms(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %ip: !llvm.ptr {llvm.noalias, llvm.readonly},
                     %op: !llvm.ptr {llvm.noalias}, %row: index, %skip0: i1, %skip1: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %rows = arith.constant 16 : index
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %idx = moe.view %ip[%c8] : !llvm.ptr -> memref<8xi32>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  scf.for %h = %c0 to %c64 step %c8 {
    %acc = vector.load %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
    %t0 = scf.if %skip0 -> (vector<8xf32>) {
      scf.yield %acc : vector<8xf32>
    } else {
      %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      %s = arith.addf %acc, %w : vector<8xf32>
      scf.yield %s : vector<8xf32>
    }
    %r = memref.load %idx[%c1] : memref<8xi32>
    %r1 = arith.index_cast %r : i32 to index
    %t1 = scf.if %skip1 -> (vector<8xf32>) {
      scf.yield %t0 : vector<8xf32>
    } else {
      %v = vector.load %x[%r1, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      %s = arith.addf %t0, %w : vector<8xf32>
      scf.yield %s : vector<8xf32>
    }
    vector.store %t1, %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @write_between
// CHECK:       scf.for %[[H:.*]] =
// CHECK:         moe.guarded_load
// CHECK-NEXT:    scf.if
// CHECK:         memref.store
// CHECK:         memref.load
// CHECK:         moe.guarded_load
// CHECK-NEXT:    scf.if
func.func @write_between(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %ip: !llvm.ptr {llvm.noalias},
                         %op: !llvm.ptr {llvm.noalias}, %row: index, %skip0: i1, %skip1: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %rows = arith.constant 16 : index
  %seven = arith.constant 7 : i32
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %idx = moe.view %ip[%c8] : !llvm.ptr -> memref<8xi32>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  scf.for %h = %c0 to %c64 step %c8 {
    %acc = vector.load %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
    %t0 = scf.if %skip0 -> (vector<8xf32>) {
      scf.yield %acc : vector<8xf32>
    } else {
      %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      %s = arith.addf %acc, %w : vector<8xf32>
      scf.yield %s : vector<8xf32>
    }
    memref.store %seven, %idx[%c1] : memref<8xi32>
    %r = memref.load %idx[%c1] : memref<8xi32>
    %r1 = arith.index_cast %r : i32 to index
    %t1 = scf.if %skip1 -> (vector<8xf32>) {
      scf.yield %t0 : vector<8xf32>
    } else {
      %v = vector.load %x[%r1, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      %s = arith.addf %t0, %w : vector<8xf32>
      scf.yield %s : vector<8xf32>
    }
    vector.store %t1, %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @summed_term
// CHECK:       scf.for %[[H:.*]] =
// CHECK-NEXT:    %[[V:.*]] = moe.guarded_load %{{.*}}[%{{.*}}, %[[H]]] if %arg4 readonly
// CHECK-NEXT:    %[[S:.*]] = scf.if %arg4 -> (vector<8xf32>) {
// CHECK-NEXT:      %[[W:.*]] = arith.extf %[[V]] : vector<8xbf16> to vector<8xf32>
// CHECK-NEXT:      %[[A:.*]] = arith.addf %[[W]], %[[ZERO:.*]] : vector<8xf32>
// CHECK-NEXT:      scf.yield %[[A]] : vector<8xf32>
// CHECK-NEXT:    } else {
// CHECK-NEXT:      scf.yield %[[ZERO]] : vector<8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    vector.store %[[S]]
func.func @summed_term(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                       %rows: index, %row: index, %live: i1) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  scf.for %h = %c0 to %c64 step %c8 {
    %t = scf.if %live -> (vector<8xf32>) {
      %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      scf.yield %w : vector<8xf32>
    } else {
      scf.yield %zero : vector<8xf32>
    }
    %s = arith.addf %t, %zero : vector<8xf32>
    vector.store %s, %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @summed_unknown
// CHECK:       scf.for %[[H:.*]] =
// CHECK-NEXT:    %[[ACC:.*]] = vector.load
// CHECK-NEXT:    %[[V:.*]] = moe.guarded_load %{{.*}}[%{{.*}}, %[[H]]] if %arg4 readonly
// CHECK-NEXT:    %[[W:.*]] = arith.extf %[[V]] : vector<8xbf16> to vector<8xf32>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[W]], %[[ACC]] : vector<8xf32>
// CHECK-NEXT:    vector.store %[[S]]
func.func @summed_unknown(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                          %rows: index, %row: index, %live: i1) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  scf.for %h = %c0 to %c64 step %c8 {
    %acc = vector.load %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
    %t = scf.if %live -> (vector<8xf32>) {
      %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      scf.yield %w : vector<8xf32>
    } else {
      scf.yield %zero : vector<8xf32>
    }
    %s = arith.addf %t, %acc : vector<8xf32>
    vector.store %s, %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @error_branch
// CHECK-NOT:   moe.guarded_load
// CHECK:       memref.store
func.func @error_branch(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                        %sp: !llvm.ptr {llvm.noalias, moe.arg = #moe.arg<status>}, %rows: index, %row: index, %inside: i1) {
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
      %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      scf.yield %w : vector<8xf32>
    } else {
      memref.store %one, %status[%c0] : memref<2xi64>
      scf.yield %zero : vector<8xf32>
    }
    vector.store %t, %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
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
      %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      scf.yield %w : vector<8xf32>
    } else {
      scf.yield %zero : vector<8xf32>
    }
    vector.store %t, %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
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
      %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %next = arith.addi %row, %c1 : index
      %u = vector.load %x[%next, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      %y = arith.extf %u : vector<8xbf16> to vector<8xf32>
      %s = arith.addf %w, %y : vector<8xf32>
      scf.yield %s : vector<8xf32>
    } else {
      scf.yield %zero : vector<8xf32>
    }
    vector.store %t, %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
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
    %v = vector.load %x[%row, %c0] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
    %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
    scf.yield %w : vector<8xf32>
  } else {
    scf.yield %zero : vector<8xf32>
  }
  vector.store %t, %out[%c0] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
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

// CHECK-LABEL: func.func @point_with_store
// CHECK:       scf.for %[[H:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}})
// CHECK-NEXT:    %[[V:.*]] = moe.guarded_load %{{.*}}[%arg5, %[[H]]] if %arg6 readonly : memref<?x64xbf16>, vector<8xbf16>
// CHECK-NEXT:    %[[W:.*]] = arith.extf %[[V]] : vector<8xbf16> to vector<8xf32>
// CHECK-NEXT:    %[[P:.*]] = moe.guarded_load %{{.*}}[%arg5] if %arg6 readonly : memref<?xbf16>, bf16
// CHECK:         %[[R:.*]] = arith.truncf
// CHECK-NEXT:    %[[BOTH:.*]] = arith.andi %arg6, %arg7 : i1
// CHECK-NEXT:    moe.guarded_store %[[R]], %{{.*}}[%arg5, %[[H]]] if %[[BOTH]] : memref<?x64xbf16>, vector<8xbf16>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[ACC]], %[[W]] : vector<8xf32>
// CHECK-NEXT:    %[[T:.*]] = arith.select %arg6, %[[S]], %[[ACC]] : vector<8xf32>
// CHECK-NEXT:    scf.yield %[[T]] : vector<8xf32>
func.func @point_with_store(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %pp: !llvm.ptr {llvm.noalias, llvm.readonly},
                            %yp: !llvm.ptr {llvm.noalias}, %op: !llvm.ptr {llvm.noalias}, %rows: index, %row: index,
                            %active: i1, %writes: i1) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %p = moe.view %pp[%rows] : !llvm.ptr -> memref<?xbf16>
  %y = moe.view %yp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c8] : !llvm.ptr -> memref<8xf32>
  %sum = scf.for %h = %c0 to %c64 step %c8 iter_args(%acc = %zero) -> (vector<8xf32>) {
    %t = scf.if %active -> (vector<8xf32>) {
      %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      %q = memref.load %p[%row] : memref<?xbf16>
      %f = arith.extf %q : bf16 to f32
      %b = vector.broadcast %f : f32 to vector<8xf32>
      %m = arith.mulf %w, %b : vector<8xf32>
      %r = arith.truncf %m : vector<8xf32> to vector<8xbf16>
      scf.if %writes {
        vector.store %r, %y[%row, %h] {alignment = 16 : i64} : memref<?x64xbf16>, vector<8xbf16>
      }
      %s = arith.addf %acc, %w : vector<8xf32>
      scf.yield %s : vector<8xf32>
    } else {
      scf.yield %acc : vector<8xf32>
    }
    scf.yield %t : vector<8xf32>
  }
  vector.store %sum, %out[%c0] {alignment = 16 : i64} : memref<8xf32>, vector<8xf32>
  return
}

// CHECK-LABEL: func.func @store_branch
// CHECK:       scf.for %[[H:.*]] =
// CHECK-NEXT:    %[[V:.*]] = vector.load
// CHECK-NEXT:    moe.guarded_store %[[V]], %{{.*}}[%arg3, %[[H]]] if %arg4 : memref<?x64xf32>, vector<4xf32>
// CHECK-NEXT:  }
func.func @store_branch(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %yp: !llvm.ptr {llvm.noalias},
                        %rows: index, %row: index, %writes: i1) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c4 = arith.constant 4 : index
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xf32>
  %y = moe.view %yp[%rows, %c64] : !llvm.ptr -> memref<?x64xf32>
  scf.for %h = %c0 to %c64 step %c4 {
    %v = vector.load %x[%row, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
    scf.if %writes {
      vector.store %v, %y[%row, %h] {alignment = 16 : i64} : memref<?x64xf32>, vector<4xf32>
    }
  }
  return
}

// CHECK-LABEL: func.func @scalar_store_branch
// CHECK-NOT:   moe.guarded_store
// CHECK:       return
func.func @scalar_store_branch(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %yp: !llvm.ptr {llvm.noalias},
                               %rows: index, %row: index, %writes: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xf32>
  %y = moe.view %yp[%rows, %c64] : !llvm.ptr -> memref<?x64xf32>
  scf.for %h = %c0 to %c64 step %c1 {
    %v = memref.load %x[%row, %h] : memref<?x64xf32>
    scf.if %writes {
      memref.store %v, %y[%row, %h] : memref<?x64xf32>
    }
  }
  return
}

// CHECK-LABEL: func.func @unaligned_term
// CHECK-NOT:   moe.guarded_load
// CHECK:       return
func.func @unaligned_term(%xp: !llvm.ptr {llvm.noalias, llvm.readonly}, %op: !llvm.ptr {llvm.noalias},
                          %rows: index, %row: index, %live: i1) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant dense<0.0> : vector<8xf32>
  %x = moe.view %xp[%rows, %c64] : !llvm.ptr -> memref<?x64xbf16>
  %out = moe.view %op[%c64] : !llvm.ptr -> memref<64xf32>
  scf.for %h = %c0 to %c64 step %c8 {
    %t = scf.if %live -> (vector<8xf32>) {
      %v = vector.load %x[%row, %h] {alignment = 4 : i64} : memref<?x64xbf16>, vector<8xbf16>
      %w = arith.extf %v : vector<8xbf16> to vector<8xf32>
      scf.yield %w : vector<8xf32>
    } else {
      scf.yield %zero : vector<8xf32>
    }
    vector.store %t, %out[%h] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
  }
  return
}
