//===- Chip.h - Ascend chip descriptions: data, not code ---------*- C++ -*-===//
//
// A chip is what an Ascend tiling plan depends on: the vector cores, the usable Unified Buffer (UB), its
// alignment, the copy limits, and the figures of the cost model. The built-in chips are the JSON files
// in contracts/ascend/chips/, embedded at build time; `--chip-file` reads a user's file by the same rules.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moec::ascend {

struct Chip {
  std::string name;
  std::string description;
  int64_t vectorCores = 0;          // AIV cores a kernel can run on (blockDim <= this)
  int64_t ubBytes = 0;              // usable UB per core (GetCoreMemSize(UB): 196352 on 910B)
  int64_t ubAlignment = 32;         // every UB buffer starts and is sized at a multiple of this
  int64_t burstBytes = 512;         // GM <-> UB moves are fastest in bursts of this
  int64_t maxCopyBytes = 65536;     // the most one buffer of a row chunk holds (one DataCopy)
  int64_t systemWorkspaceBytes = 0; // the system workspace every CANN op reserves (16 MiB)
  // Cost model (Plan.h's coreCostNs): a core's time is coreLaunchNs, its scalar reads, and its DataCopy
  // set-ups and GM bytes at gmGBpsPerCore, added when single-buffered, overlapped when double-buffered.
  double gmGBpsPerCore = 0; // GM bandwidth one core gets when all run (HBM bandwidth / cores)
  double dataCopyNs = 0;    // fixed cost of one DataCopy
  double scalarReadNs = 0;  // one scalar load from GM (through the scalar unit's cache)
  double coreLaunchNs = 0;  // fixed cost of starting a core
  // A SyncAll between the stages of one launch: every core waits there for the others. An op's kernels
  // share a launch, one stage each, when this is cheaper than coreLaunchNs (chip files without the field:
  // equal, so each kernel is its own launch).
  double syncAllNs = 0;
};

/// One embedded chip file (contracts/ascend/chips/*.json).
struct BuiltinChipFile {
  const char *name; // "910b3"
  const char *path; // "contracts/ascend/chips/910b3.json"
  const char *text;
};
const std::vector<BuiltinChipFile> &builtinChipFiles();

/// The built-in chip `name` ("910b", "910b1" ... "910b4", "910_93", "310p", "ascend950"). Throws
/// std::invalid_argument listing the names for an unknown one.
Chip builtinChip(const std::string &name);

/// "910b, 910b1, ...": the built-in names, for help and messages.
std::string builtinChipNames();

/// Parses and checks a chip file: format 1, every field present with the right type and within limits
/// (cores in [1, 4096], UB in [1 KiB, 64 MiB], alignment a power of two in [1, 4096] dividing the UB...).
/// Throws std::runtime_error "<where>: '<field>' ..." otherwise.
Chip chipFromJson(const std::string &text, const std::string &where);

/// Every figure of the chip as one line of JSON in a fixed order (a chip file's fields): what cache keys
/// hold, so that a chip file changing any figure never reuses what another made.
std::string chipKeyText(const Chip &chip);

/// Reads `path` (at most 1 MiB) and parses it with chipFromJson. Throws std::runtime_error.
Chip loadChipFile(const std::string &path);

} // namespace moec::ascend
