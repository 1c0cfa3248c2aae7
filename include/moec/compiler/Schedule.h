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

/// Why `s` is not a schedule moec can compile or launch, or "" when it is. With `requested`, 0 means "the
/// compiler's choice" and is allowed in every field; a complete schedule (from a cache entry or a bundle)
/// has every field set. Header-only so the LLVM-free runtime checks what it loads with the same rules.
inline std::string scheduleError(const Schedule &s, TargetKind target, bool requested) {
  auto bad = [](const char *field, int64_t v, const std::string &expected) {
    return std::string("schedule ") + field + " is " + std::to_string(v) + ", expected " + expected;
  };
  int64_t least = requested ? 0 : 1;
  if (s.vector != 0 || !requested)
    if (s.vector != 1 && s.vector != 2 && s.vector != 4 && s.vector != 8 && s.vector != 16)
      return bad("vector", s.vector, requested ? "0 (choice), 1, 2, 4, 8 or 16" : "1, 2, 4, 8 or 16");
  if (s.unroll < least || s.unroll > 64)
    return bad("unroll", s.unroll, std::to_string(least) + " to 64");
  if (s.threads < least || s.threads > 1024)
    return bad("threads", s.threads, std::to_string(least) + " to 1024");
  if (target == TargetKind::GPU && s.threads % 32 != 0)
    return bad("threads", s.threads, "a multiple of 32 (whole warps)");
  if (s.rowsPerBlock < least || s.rowsPerBlock > 1024)
    return bad("rows per block", s.rowsPerBlock, std::to_string(least) + " to 1024");
  if (target == TargetKind::GPU && s.threads * s.rowsPerBlock > 1024)
    return "schedule threads x rows per block is " + std::to_string(s.threads * s.rowsPerBlock) +
           ", expected at most 1024 (a thread block)";
  return "";
}

/// Fills every field of `requested` that is 0 with the compiler's choice for an output whose contiguous
/// dim has `inner` elements (0 when unknown at compile time) of `elemBytes` bytes each. `vectorizable`
/// says whether the body allows vector accesses along the contiguous dim at all.
Schedule chooseSchedule(Schedule requested, TargetKind target, int64_t inner, int64_t elemBytes,
                        bool vectorizable);

} // namespace moec
