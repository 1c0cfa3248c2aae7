//===- SimHooks.h - How a simulated tiled kernel reaches its core's runtime -*- C++ -*-===//
//
// A tiled Ascend kernel compiled for the CPU takes a pointer to this table (its `ascend:runtime`
// argument) and calls through it to place and release UB buffers, to DataCopy, and to report finished
// rows (moe.ub_alloc, moe.ub_free, moe.data_copy, moe.row_done lower to these calls). The simulator
// fills it (runtime/ascend/SimLauncher.cpp). A C layout: the compiler indexes it by slot.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace moec::ascend {

struct UbHooks {
  void *simulator;
  /// The memory of buffer `name` at `offset` of `core`'s UB, `bytes` long.
  void *(*place)(void *simulator, int64_t core, const char *name, int64_t offset, int64_t bytes);
  void (*release)(void *simulator, int64_t core, const char *name);
  /// DataCopy: `bytes` from gm to ub when `toUb`, else from ub to gm.
  void (*copy)(void *simulator, int64_t core, int64_t toUb, void *ub, void *gm, int64_t bytes);
  void (*rowDone)(void *simulator, int64_t core, int64_t row);
  /// A scalar load of `bytes` from GM (GlobalTensor::GetValue).
  void (*scalarRead)(void *simulator, int64_t core, int64_t bytes);
};

/// Slots of the table, as the compiler indexes it (pointer-sized entries).
inline constexpr int64_t kUbHookPlace = 1, kUbHookRelease = 2, kUbHookCopy = 3, kUbHookRowDone = 4,
                         kUbHookScalarRead = 5;

} // namespace moec::ascend
