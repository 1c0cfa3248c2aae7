// moe-budget-registers (GPU, the opt-in register-budget): every kernel gets nvvm.maxnreg, which NVPTX writes
// as .maxnreg, so that ptxas stays within the budget instead of taking what the block size allows; a
// function that is not a kernel is left alone. A budget ptxas cannot honour is refused.
// RUN: moec-opt %s --moe-budget-registers | FileCheck %s
// RUN: moec-opt %s --moe-budget-registers=registers=96 | FileCheck %s --check-prefix=R96
// RUN: not moec-opt %s --moe-budget-registers=registers=300 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK-LABEL: gpu.func @kernel
// CHECK-SAME: nvvm.maxnreg = 128 : i32
// CHECK-LABEL: gpu.func @helper
// CHECK-NOT: nvvm.maxnreg
// R96: gpu.func @kernel{{.*}}nvvm.maxnreg = 96 : i32
// BAD: moe-budget-registers: registers must be from 16 to 255, got 300
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @kernel(%arg0: index) kernel attributes {known_block_size = array<i32: 32, 8, 1>} {
      gpu.return
    }
    gpu.func @helper(%arg0: index) {
      gpu.return
    }
  }
}
