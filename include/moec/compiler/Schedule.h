//===- Schedule.h - How a kernel runs, apart from what it computes -*- C++ -*-===//
//
// The algorithm (a .moe file) says what to compute; a Schedule says how. The compiler picks one with
// chooseSchedule(); autotuning sweeps others. It is part of the cache key.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

namespace moec {

struct Schedule {
  int64_t rowsPerBlock = 0; // GPU: rows per thread block (block.y)
  int64_t threads = 0;      // GPU: threads along the contiguous dim (block.x)
  int64_t vector = 0;       // contiguous elements handled together (1 = scalar)
  int64_t unroll = 0;       // moe.sum unroll factor

  bool operator==(const Schedule &o) const {
    return rowsPerBlock == o.rowsPerBlock && threads == o.threads && vector == o.vector && unroll == o.unroll;
  }
  /// "r1.t256.v8.u8": stable text for cache keys and kernel names.
  std::string str() const {
    return "r" + std::to_string(rowsPerBlock) + ".t" + std::to_string(threads) + ".v" + std::to_string(vector) +
           ".u" + std::to_string(unroll);
  }
};

enum class TargetKind { CPU, GPU };

/// Fills every field of `requested` that is 0 with the compiler's choice for an output whose contiguous
/// dim has `inner` elements (0 when unknown at compile time) of `elemBytes` bytes each. `vectorizable`
/// says whether the body allows vector accesses along the contiguous dim at all.
Schedule chooseSchedule(Schedule requested, TargetKind target, int64_t inner, int64_t elemBytes,
                        bool vectorizable);

} // namespace moec
