// A UB buffer's role is a keyword of #moe.ub_buffer (the lowering places buffers by it), printed back as
// read; a role the dialect does not have is a parse error, not a buffer of no role.
// RUN: moec-opt %s -verify-diagnostics -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @roles
// CHECK-SAME: #moe.ub_buffer<in, "x", elementBytes = 2, copies = 1, perRowOfPass = false, fixedBytesPerRow = 0,
// CHECK-SAME: reuseDims = 1, copiesPerChunk = 1, wholeRow = true>
// CHECK-SAME: #moe.ub_buffer<acc, "f32", elementBytes = 4, copies = 1, perRowOfPass = false, fixedBytesPerRow = 0,
// CHECK-SAME: reuseDims = 0, copiesPerChunk = 0>
// CHECK-SAME: #moe.ub_buffer<idx, "index", elementBytes = 0, copies = 1, perRowOfPass = true, fixedBytesPerRow = 8,
func.func @roles() attributes {buffers = [
    #moe.ub_buffer<in, "x", elementBytes = 2, copies = 1, perRowOfPass = false, fixedBytesPerRow = 0, reuseDims = 1,
                   copiesPerChunk = 1, wholeRow = true>,
    #moe.ub_buffer<acc, "f32", elementBytes = 4, copies = 1, perRowOfPass = false, fixedBytesPerRow = 0,
                   reuseDims = 0, copiesPerChunk = 0>,
    #moe.ub_buffer<idx, "index", elementBytes = 0, copies = 1, perRowOfPass = true, fixedBytesPerRow = 8,
                   reuseDims = 0, copiesPerChunk = 0>]} {
  return
}

// -----

// expected-error @+2 {{expected ::moec::moe::UbRole to be one of: in, out, row, acc, idx, cast}}
// expected-error @+1 {{failed to parse Moe_UbBufferAttr parameter 'role'}}
func.func @unknown_role() attributes {b = #moe.ub_buffer<tmp, "x", elementBytes = 2, copies = 2,
    perRowOfPass = false, fixedBytesPerRow = 0, reuseDims = 0, copiesPerChunk = 0>} {
  return
}
