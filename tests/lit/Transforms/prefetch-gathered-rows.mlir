// moe-prefetch-gathered-rows on CPU loops. @gather (B2's shape): x's row is chosen by idx[n], loaded at the
// top of the loop along the row. Before each row's loop the row's index (its load clamped into idx, 0 when idx
// is empty) is added to a table of the 64 recent rows (a stack array filled with -2); when the next row is in
// the range its index (computed the same way) is checked, and the first 768 bytes of its row are prefetched,
// a line (32 elements) at a time, when that row is inside x, not streamed (the row before it is not in the
// table) and not recent (it is not in the table itself: read again, in cache). The loop along the row (one
// copy) prefetches its load's row a distance on, clamped to the row's last element: 768 bytes (384 bf16), or
// 0 (the line the load reads anyway). A stack array per loop (rows run, cycles near, cycles ahead; zeroed)
// chooses: at the start of every 1024 rows (rows run & 1023 == 0) the two cycle sums restart from 0; the
// next 8 rows alternate the distances (even: near) and add the cycles each took (llvm.readcyclecounter
// before and after, read by these rows only) to its sum; the other rows prefetch near when that sum is the
// smaller. Each row counts one row run.
// @sequential reads row n itself: no prefetch. @written_index: the index tensor is written in the function:
// the row is prefetched along the row (at the timed distance), but no index is computed ahead.
// @conditional_index: the index is loaded under a condition (not by every row): along the row only.
// @index_before_loop: the row index is loaded before the loop along the row, from a buffer the row loop
// writes (a compacted list): no next row is computed, so no table is kept (the canonicalization drops it).
// RUN: moec-opt %s --moe-prefetch-gathered-rows --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @gather
// CHECK-DAG: %[[NONE:.*]] = arith.constant -2 : index
// CHECK-DAG: %[[MASK:.*]] = arith.constant 63 : index
// CHECK-DAG: %[[FAR:.*]] = arith.constant 384 : index
// CHECK-DAG: %[[PERIOD:.*]] = arith.constant 1023 : index
// CHECK-DAG: %[[PROBE:.*]] = arith.constant 8 : index
// CHECK-DAG: %[[NO_CYCLES:.*]] = arith.constant 0 : i64
// CHECK: %[[STATE:.*]] = memref.alloca() : memref<3xindex>
// CHECK-NEXT: memref.store %c0, %[[STATE]][%c0] : memref<3xindex>
// CHECK-NEXT: memref.store %c0, %[[STATE]][%c1] : memref<3xindex>
// CHECK-NEXT: memref.store %c0, %[[STATE]][%c2] : memref<3xindex>
// CHECK: %[[TABLE:.*]] = memref.alloca() : memref<64xindex>
// CHECK: scf.for %[[SLOT:.*]] = %{{.*}} to %c64 step %{{.*}} {
// CHECK-NEXT: memref.store %[[NONE]], %[[TABLE]][%[[SLOT]]] : memref<64xindex>
// CHECK: scf.for %[[N:.*]] = %[[B:.*]] to %[[E:.*]] step %[[C1:.*]] {
// CHECK:   %[[CUR_CL:.*]] = arith.select %{{.*}}, %[[N]], %{{.*}} : index
// CHECK:   %[[CUR_I:.*]] = scf.if %{{.*}} -> (i32) {
// CHECK:     memref.load %arg1[%[[CUR_CL]]] : memref<?xi32>
// CHECK:   %[[CUR:.*]] = arith.index_cast %[[CUR_I]] : i32 to index
// CHECK:   %[[CUR_SLOT:.*]] = arith.andi %[[CUR]], %[[MASK]] : index
// CHECK:   memref.store %[[CUR]], %[[TABLE]][%[[CUR_SLOT]]] : memref<64xindex>
// CHECK:   %[[NEXT:.*]] = arith.addi %[[N]], %[[C1]] : index
// CHECK:   %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %[[E]] : index
// CHECK:   scf.if %[[MORE]] {
// CHECK:     %[[CL:.*]] = arith.select %{{.*}}, %[[NEXT]], %{{.*}} : index
// CHECK:     %[[I1:.*]] = scf.if %{{.*}} -> (i32) {
// CHECK:       memref.load %arg1[%[[CL]]] : memref<?xi32>
// CHECK:     %[[R1:.*]] = arith.index_cast %[[I1]] : i32 to index
// CHECK:     %[[NPREV:.*]] = arith.subi %[[R1]], %[[C1]] : index
// CHECK:     %[[NSLOT:.*]] = arith.andi %[[NPREV]], %[[MASK]] : index
// CHECK:     %[[NSEEN:.*]] = memref.load %[[TABLE]][%[[NSLOT]]] : memref<64xindex>
// CHECK:     %[[NSTREAMED:.*]] = arith.cmpi eq, %[[NSEEN]], %[[NPREV]] : index
// CHECK:     %[[NOWN_SLOT:.*]] = arith.andi %[[R1]], %[[MASK]] : index
// CHECK:     %[[NOWN:.*]] = memref.load %[[TABLE]][%[[NOWN_SLOT]]] : memref<64xindex>
// CHECK:     %[[NRECENT:.*]] = arith.cmpi eq, %[[NOWN]], %[[R1]] : index
// CHECK:     %[[KNOWN:.*]] = arith.ori %[[NSTREAMED]], %[[NRECENT]] : i1
// CHECK:     %[[NEW:.*]] = arith.xori %[[KNOWN]], %true : i1
// CHECK:     %[[IN:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// CHECK:     %[[WANTED:.*]] = arith.andi %[[NEW]], %[[IN]] : i1
// CHECK:     scf.if %[[WANTED]] {
// CHECK:       memref.prefetch %arg0[%[[R1]], %c0{{.*}}], read, locality<3>, data
// CHECK:       memref.prefetch %arg0[%[[R1]], %c32], read, locality<3>, data
// CHECK-COUNT-9: memref.prefetch %arg0[%[[R1]], %c{{[0-9]+}}], read, locality<3>, data
// CHECK-NEXT:    memref.prefetch %arg0[%[[R1]], %c352], read, locality<3>, data
// CHECK-NEXT:  }
// CHECK:   %[[DONE:.*]] = memref.load %[[STATE]][%c0] : memref<3xindex>
// CHECK:   %[[PHASE:.*]] = arith.andi %[[DONE]], %[[PERIOD]] : index
// CHECK:   %[[PROBING:.*]] = arith.cmpi ult, %[[PHASE]], %[[PROBE]] : index
// CHECK:   %[[ODD:.*]] = arith.andi %[[PHASE]], %[[C1]] : index
// CHECK:   %[[EVEN:.*]] = arith.cmpi eq, %[[ODD]], %c0 : index
// CHECK:   %[[FIRST:.*]] = arith.cmpi eq, %[[PHASE]], %c0 : index
// CHECK:   scf.if %[[FIRST]] {
// CHECK-NEXT: memref.store %c0, %[[STATE]][%[[C1]]] : memref<3xindex>
// CHECK-NEXT: memref.store %c0, %[[STATE]][%c2] : memref<3xindex>
// CHECK-NEXT: }
// CHECK:   %[[NEAR_CYCLES:.*]] = memref.load %[[STATE]][%[[C1]]] : memref<3xindex>
// CHECK:   %[[AHEAD_CYCLES:.*]] = memref.load %[[STATE]][%c2] : memref<3xindex>
// CHECK:   %[[FASTER:.*]] = arith.cmpi ult, %[[NEAR_CYCLES]], %[[AHEAD_CYCLES]] : index
// CHECK:   %[[NEAR:.*]] = arith.select %[[PROBING]], %[[EVEN]], %[[FASTER]] : i1
// CHECK:   %[[T0:.*]] = scf.if %[[PROBING]] -> (i64) {
// CHECK-NEXT: %[[READ0:.*]] = llvm.call_intrinsic "llvm.readcyclecounter"() : () -> i64
// CHECK-NEXT: scf.yield %[[READ0]] : i64
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[NO_CYCLES]] : i64
// CHECK-NEXT: }
// CHECK:   %[[DISTANCE:.*]] = arith.select %[[NEAR]], %c0, %[[FAR]] : index
// CHECK-NOT: scf.if
// CHECK:     scf.for %[[H:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:       %[[I:.*]] = memref.load %arg1[%[[N]]] : memref<?xi32>
// CHECK:       %[[R:.*]] = arith.index_cast %[[I]] : i32 to index
// CHECK:       %[[AHEAD:.*]] = arith.addi %[[H]], %[[DISTANCE]] : index
// CHECK:       %[[AT:.*]] = arith.minui %[[AHEAD]], %c4095 : index
// CHECK:       memref.prefetch %arg0[%[[R]], %[[AT]]], read, locality<3>, data
// CHECK:       vector.load %arg0[%[[R]], %[[H]]]
// CHECK-NOT: scf.for
// CHECK:   scf.if %[[PROBING]] {
// CHECK-NEXT: %[[T1:.*]] = llvm.call_intrinsic "llvm.readcyclecounter"() : () -> i64
// CHECK-NEXT: %[[TOOK:.*]] = arith.subi %[[T1]], %[[T0]] : i64
// CHECK-NEXT: %[[CYCLES:.*]] = arith.index_cast %[[TOOK]] : i64 to index
// CHECK-NEXT: %[[SUM_SLOT:.*]] = arith.select %[[NEAR]], %[[C1]], %c2 : index
// CHECK-NEXT: %[[OLD:.*]] = memref.load %[[STATE]][%[[SUM_SLOT]]] : memref<3xindex>
// CHECK-NEXT: %[[SUM:.*]] = arith.addi %[[OLD]], %[[CYCLES]] : index
// CHECK-NEXT: memref.store %[[SUM]], %[[STATE]][%[[SUM_SLOT]]] : memref<3xindex>
// CHECK-NEXT: }
// CHECK:   %[[DONE1:.*]] = arith.addi %[[DONE]], %[[C1]] : index
// CHECK:   memref.store %[[DONE1]], %[[STATE]][%c0] : memref<3xindex>
func.func @gather(%x: memref<?x4096xbf16>, %idx: memref<?xi32>, %out: memref<?x4096xbf16>, %begin: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c4096 = arith.constant 4096 : index
  scf.for %n = %begin to %end step %c1 {
    scf.for %h = %c0 to %c4096 step %c16 {
      %i = memref.load %idx[%n] : memref<?xi32>
      %r = arith.index_cast %i : i32 to index
      %v = vector.load %x[%r, %h] : memref<?x4096xbf16>, vector<16xbf16>
      vector.store %v, %out[%n, %h] : memref<?x4096xbf16>, vector<16xbf16>
    }
  }
  return
}

// CHECK-LABEL: func.func @sequential
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @sequential(%x: memref<?x4096xbf16>, %out: memref<?x4096xbf16>, %begin: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c4096 = arith.constant 4096 : index
  scf.for %n = %begin to %end step %c1 {
    scf.for %h = %c0 to %c4096 step %c16 {
      %v = vector.load %x[%n, %h] : memref<?x4096xbf16>, vector<16xbf16>
      vector.store %v, %out[%n, %h] : memref<?x4096xbf16>, vector<16xbf16>
    }
  }
  return
}

// CHECK-LABEL: func.func @written_index
// CHECK: scf.for
// CHECK-NOT: memref.prefetch
// CHECK: llvm.call_intrinsic "llvm.readcyclecounter"
// CHECK: %[[DISTANCE:.*]] = arith.select %{{.*}}, %c0{{.*}}, %c384 : index
// CHECK: scf.for %[[H:.*]] = 
// CHECK: arith.addi %[[H]], %[[DISTANCE]] : index
// CHECK: memref.prefetch %arg0[%{{.*}}, %{{.*}}], read, locality<3>, data
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @written_index(%x: memref<?x4096xbf16>, %idx: memref<?xi32>, %out: memref<?x4096xbf16>, %begin: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c4096 = arith.constant 4096 : index
  %zero = arith.constant 0 : i32
  scf.for %n = %begin to %end step %c1 {
    scf.for %h = %c0 to %c4096 step %c16 {
      %i = memref.load %idx[%n] : memref<?xi32>
      %r = arith.index_cast %i : i32 to index
      %v = vector.load %x[%r, %h] : memref<?x4096xbf16>, vector<16xbf16>
      vector.store %v, %out[%n, %h] : memref<?x4096xbf16>, vector<16xbf16>
    }
    memref.store %zero, %idx[%n] : memref<?xi32>
  }
  return
}

// CHECK-LABEL: func.func @conditional_index
// CHECK: scf.for
// CHECK-NOT: memref.prefetch
// CHECK: arith.select %{{.*}}, %c0{{.*}}, %c384 : index
// CHECK: scf.for
// CHECK: scf.if
// CHECK: memref.prefetch %arg0[%{{.*}}, %{{.*}}], read, locality<3>, data
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @conditional_index(%x: memref<?x4096xbf16>, %idx: memref<?xi32>, %out: memref<?x4096xbf16>, %live: i1, %begin: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c4096 = arith.constant 4096 : index
  %zeros = arith.constant dense<0.0> : vector<16xbf16>
  scf.for %n = %begin to %end step %c1 {
    scf.for %h = %c0 to %c4096 step %c16 {
      %v = scf.if %live -> (vector<16xbf16>) {
        %i = memref.load %idx[%n] : memref<?xi32>
        %r = arith.index_cast %i : i32 to index
        %l = vector.load %x[%r, %h] : memref<?x4096xbf16>, vector<16xbf16>
        scf.yield %l : vector<16xbf16>
      } else {
        scf.yield %zeros : vector<16xbf16>
      }
      vector.store %v, %out[%n, %h] : memref<?x4096xbf16>, vector<16xbf16>
    }
  }
  return
}

// CHECK-LABEL: func.func @index_before_loop
// CHECK: scf.for %[[N:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:   memref.store %{{.*}}, %[[LIST:.*]][%c0] : memref<1xi32>
// CHECK:   %[[I:.*]] = memref.load %[[LIST]][%c0] : memref<1xi32>
// CHECK:   %[[R:.*]] = arith.index_cast %[[I]] : i32 to index
// CHECK-NOT: memref.prefetch
// CHECK-NOT: memref<64xindex>
// CHECK:   llvm.call_intrinsic "llvm.readcyclecounter"
// CHECK:   scf.for
// CHECK:     memref.prefetch %arg0[%[[R]], %{{.*}}], read, locality<3>, data
// CHECK:   }
func.func @index_before_loop(%x: memref<?x4096xbf16>, %idx: memref<?xi32>, %out: memref<?x4096xbf16>, %begin: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c4096 = arith.constant 4096 : index
  %list = memref.alloca() : memref<1xi32>
  scf.for %n = %begin to %end step %c1 {
    %j = memref.load %idx[%n] : memref<?xi32>
    memref.store %j, %list[%c0] : memref<1xi32>
    %i = memref.load %list[%c0] : memref<1xi32>
    %r = arith.index_cast %i : i32 to index
    scf.for %h = %c0 to %c4096 step %c16 {
      %v = vector.load %x[%r, %h] : memref<?x4096xbf16>, vector<16xbf16>
      vector.store %v, %out[%n, %h] : memref<?x4096xbf16>, vector<16xbf16>
    }
  }
  return
}
