// moe.guarded_load and moe.guarded_store lowered to LLVM: on the host llvm.masked.load / llvm.masked.store
// (a one-lane vector for a scalar), in a gpu.module inline PTX that sets a predicate from the guard and
// loads or stores under it (registers zeroed first for a load; a 2-byte scalar in a 16-bit register), at a
// global-space address (NVPTX folds the cast with its kernel arguments' own: no cvta to generic and back).
// RUN: moec-opt %s --convert-to-llvm | FileCheck %s

// CHECK-LABEL: llvm.func @host
// CHECK: llvm.intr.masked.load %{{.*}}, %{{.*}}, %{{.*}} {alignment = 2 : i32} : (!llvm.ptr, vector<1xi1>, vector<1xbf16>) -> vector<1xbf16>
// CHECK: llvm.intr.masked.store %{{.*}}, %{{.*}}, %{{.*}} {alignment = 2 : i32} : vector<8xbf16>, vector<8xi1> into !llvm.ptr
// CHECK: llvm.intr.masked.store %{{.*}}, %{{.*}}, %{{.*}} {alignment = 2 : i32} : vector<1xbf16>, vector<1xi1> into !llvm.ptr
func.func @host(%x: memref<?x64xbf16>, %v: vector<8xbf16>, %i: index, %p: i1) -> bf16 {
  %a = moe.guarded_load %x[%i, %i] if %p readonly : memref<?x64xbf16>, bf16
  moe.guarded_store %v, %x[%i, %i] if %p : memref<?x64xbf16>, vector<8xbf16>
  moe.guarded_store %a, %x[%i, %i] if %p : memref<?x64xbf16>, bf16
  return %a : bf16
}

// CHECK-LABEL: gpu.func @device
// CHECK: %[[A:.*]] = llvm.addrspacecast %{{.*}} : !llvm.ptr to !llvm.ptr<1>
// CHECK: llvm.inline_asm asm_dialect = att "{{.*}}setp.ne.b32 %moe_p, $2, 0;\0Amov.b16 $0, 0;\0A@%moe_p ld.global.nc.b16 $0, [$1];\0A}", "=h,l,r" %[[A]],
// CHECK: %[[S:.*]] = llvm.addrspacecast %{{.*}} : !llvm.ptr to !llvm.ptr<1>
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "{{.*}}setp.ne.b32 %moe_p, $5, 0;\0A@%moe_p st.global.v4.b32 [$4], {$0, $1, $2, $3};\0A}", "r,r,r,r,l,r" %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[S]],
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "{{.*}}@%moe_p st.global.b16 [$1], $0;\0A}", "h,l,r"
gpu.module @kernels {
  gpu.func @device(%x: memref<?x64xbf16>, %v: vector<8xbf16>, %i: index, %p: i1) kernel {
    %a = moe.guarded_load %x[%i, %i] if %p readonly : memref<?x64xbf16>, bf16
    moe.guarded_store %v, %x[%i, %i] if %p : memref<?x64xbf16>, vector<8xbf16>
    moe.guarded_store %a, %x[%i, %i] if %p : memref<?x64xbf16>, bf16
    gpu.return
  }
}
