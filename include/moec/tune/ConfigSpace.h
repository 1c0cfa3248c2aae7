//===- ConfigSpace.h - The schedules autotuning may try, per target -*- C++ -*-===//
//
// A config is a Schedule (moec/contracts/Schedule.h) written as plain text that prints and parses:
//
//   vector=8,threads=1,rows=16,unroll=4                (every field; 0 means the compiler's choice)
//   vector=8,threads=1,rows=16,unroll=4,off=streaming-stores   (optimizations turned off, '+'-joined;
//   on=NAME turns opt-in ones on, where there are any)
//   heuristic                                          (Schedule{}: every field the compiler's choice)
//   buffers=2,chunk=4096,rows=64                       (ascend: the UB plan; the vector code the compiler's)
//
// Each target's space is declared once, in ConfigSpace.cpp (kCpuKnobs, kGpuKnobs, kAscendKnobs): the values
// each knob takes. prunedBecause() rejects a config before it is compiled: the compiler's own schedule
// rules, then what the kernel's shape rules out (a vector wider than the row or than one register, a GPU
// vector that leaves rows unaligned, more accumulators than a thread has registers; on Ascend a chunk
// longer than the row, than one DataCopy or than the chip's UB, rows sharing a pass of a chunked row).
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/contracts/Schedule.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace moec::tune {

/// The text of `s`: "vector=8,threads=1,rows=16,unroll=4[,off=a+b][,on=c]", "buffers=2,chunk=4096,rows=64" for an
/// Ascend config, or "heuristic" for Schedule{}.
std::string configText(const Schedule &s);

/// Parses configText's format (fields in any order, each at most once, missing ones 0; "heuristic"). Throws
/// std::invalid_argument naming the field: "unknown field 'vec'", "'unroll': 'x' is not a whole number".
Schedule parseConfig(const std::string &text);

/// One knob of a space and the values a sweep gives it.
struct Knob {
  const char *name;
  std::vector<int64_t> values;
};

/// What a kernel's shape says about which configs make sense.
struct ShapeFacts {
  int64_t inner = 0;     // the contiguous dim of the output (0: unknown)
  int64_t elemBytes = 4; // its element size
  int64_t ubBytes = 0, maxCopyBytes = 0; // Ascend: the chip's usable UB and DataCopy limit (0: unknown)
};

/// The knobs of `target`'s space, in the order configs vary (the last fastest).
const std::vector<Knob> &knobsOf(TargetKind target);

/// Every config of `target`'s space (the knobs' cartesian product), in a fixed order: a sweep always
/// tries the same configs in the same order.
std::vector<Schedule> configSpace(TargetKind target);

/// Why `s` is not worth compiling for a kernel with `facts` on `target`, or "" when it is.
std::string prunedBecause(const Schedule &s, TargetKind target, const ShapeFacts &facts);

/// The config's family for plots: its text without `vector` (each family is one line over the vector
/// widths); an Ascend config's buffers and rows (one line over the chunks).
std::string familyOf(const Schedule &s);

/// The value a plot puts the config at along x: its vector width, an Ascend config's chunk.
int64_t plotAxisOf(const Schedule &s);

} // namespace moec::tune
