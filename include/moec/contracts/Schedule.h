//===- Schedule.h - How a kernel runs, apart from what it computes -*- C++ -*-===//
//
// The algorithm (a .moe file) says what to compute; a Schedule says how. The compiler picks one with
// chooseSchedule() (moec/compiler/DefaultSchedule.h); autotuning sweeps others. It is part of the cache key.
// A contract: the compiler, the runtime (bundles, the disk cache) and the PTX emulator read it.
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace moec {

/// The compiler's optional optimizations, each a pass that changes how a kernel runs but never what it
/// computes (tests check results bit for bit with each one off, and each opt-in one on). A Schedule can
/// turn them off; the opt-in ones (kOptInOptimizations) run only where a Schedule turns them on.
enum Optimization : uint32_t {
  kHoistRowInvariants = 1u << 0,       // moe-hoist-row-invariants
  kCompactPredicatedFolds = 1u << 1,   // moe-compact-predicated-folds
  kStreamingStores = 1u << 2,          // moe-streaming-stores (CPU)
  kAccumulateRows = 1u << 3,           // moe-accumulate-rows (CPU)
  kFillUncoveredRows = 1u << 4,        // moe-fill-uncovered-rows
  kCarryPrefixFolds = 1u << 5,         // moe-carry-prefix-folds
  kInterleaveReductions = 1u << 6,     // moe-interleave-reductions (CPU)
  kFuseRowStores = 1u << 7,            // genMoe's statement fusion (dsl::FusedRows; every target)
  kGroupRows = 1u << 8,                // moe-group-rows (GPU)
  kGroupPoints = 1u << 9,              // moe-group-points (GPU)
  kLanePointAccess = 1u << 10,         // moe-lane-point-access (GPU)
  kPrefetchGatheredRows = 1u << 11,    // moe-prefetch-gathered-rows (CPU)
  kWidenRoundedFolds = 1u << 12,       // moe-widen-rounded-folds (CPU)
  kVersionRowLoops = 1u << 13,         // moe-version-row-loops
  kUncheckedStepRoundings = 1u << 14,  // moe-widen-rounded-folds{unchecked-roundings} (CPU)
  kNativeBf16Roundings = 1u << 15,     // moe-native-bf16-roundings (CPU with AVX512-BF16)
  kGuardLoads = 1u << 16,              // moe-guard-loads (GPU)
  kLoadsInFlight = 1u << 17,           // moe-unroll-lane-sums, moe-unroll-row-loops (GPU)
  kShortLists = 1u << 18,              // moe-short-lists (CPU with accumulate-rows, GPU)
  kWidenBf16Pairs = 1u << 19,          // moe-widen-bf16-pairs (CPU)
  kCompressLists = 1u << 20,           // moe-compress-lists (CPU with AVX-512)
  kCompactPredicatedPoints = 1u << 21, // moe-compact-predicated-points (CPU)
  kRegisterBudget = 1u << 22,          // moe-budget-registers, moe-group-points{batch=4} (GPU; opt-in)
  kStepTables = 1u << 23,              // moe-step-tables (GPU, with hoist-row-invariants)
  kAllOptimizations = (1u << 24) - 1,
  // Off unless asked for (`--enable NAME`, a config's `on=NAME`): for an optimization that wins at some
  // shapes and loses at others, by more than a rule the compiler can check tells apart, so that `moec
  // tune` decides (prefetch-gathered-rows was one until it learnt to tell them apart). register-budget:
  // 128 registers a thread, for twice the warps per SM, and A3's probs kernels' dot products in batches of
  // 4, not 8 (a token's gradient row read twice at top-8); which wins is for a GPU to say.
  kOptInOptimizations = kRegisterBudget,
};

/// Each optimization by the name `--disable NAME` / `--enable NAME` and a config's `off=NAME` / `on=NAME`
/// give it, in bit order.
inline constexpr std::pair<const char *, Optimization> kOptimizationsByName[] = {
    {"hoist-row-invariants", kHoistRowInvariants},
    {"compact-predicated-folds", kCompactPredicatedFolds},
    {"streaming-stores", kStreamingStores},
    {"accumulate-rows", kAccumulateRows},
    {"fill-uncovered-rows", kFillUncoveredRows},
    {"carry-prefix-folds", kCarryPrefixFolds},
    {"interleave-reductions", kInterleaveReductions},
    {"fuse-row-stores", kFuseRowStores},
    {"group-rows", kGroupRows},
    {"group-points", kGroupPoints},
    {"lane-point-access", kLanePointAccess},
    {"prefetch-gathered-rows", kPrefetchGatheredRows},
    {"widen-rounded-folds", kWidenRoundedFolds},
    {"version-row-loops", kVersionRowLoops},
    {"unchecked-step-roundings", kUncheckedStepRoundings},
    {"native-bf16-roundings", kNativeBf16Roundings},
    {"guard-loads", kGuardLoads},
    {"loads-in-flight", kLoadsInFlight},
    {"short-lists", kShortLists},
    {"widen-bf16-pairs", kWidenBf16Pairs},
    {"compress-lists", kCompressLists},
    {"compact-predicated-points", kCompactPredicatedPoints},
    {"register-budget", kRegisterBudget},
    {"step-tables", kStepTables}};
static_assert(
    [] {
      uint32_t all = 0;
      for (const auto &entry : kOptimizationsByName)
        all |= entry.second;
      return all;
    }() == kAllOptimizations,
    "every optimization has a name");

/// "hoist-row-invariants, compact-predicated-folds, ...": the names of the optimizations in `mask`, for
/// messages and help ("none" for an empty mask).
inline std::string optimizationNames(uint32_t mask = kAllOptimizations) {
  std::string text;
  for (const auto &[name, bit] : kOptimizationsByName)
    if (mask & bit)
      text += (text.empty() ? "" : ", ") + std::string(name);
  return text.empty() ? "none" : text;
}

/// "hoist-row-invariants" -> kHoistRowInvariants; 0 for an unknown name.
inline uint32_t optimizationByName(const std::string &name) {
  for (const auto &[known, bit] : kOptimizationsByName)
    if (name == known)
      return bit;
  return 0;
}

struct Schedule {
  int64_t rowsPerBlock = 0; // GPU: rows per thread block (block.y); CPU: the least rows a worker takes
  int64_t threads = 0;      // GPU: threads along the contiguous dim (block.x)
  int64_t vector = 0;       // contiguous elements handled together (1 = scalar)
  int64_t unroll = 0;       // moe.sum unroll factor
  uint32_t disabled = 0;    // Optimization bits turned off (0: all on, but the opt-in ones)
  uint32_t enabled = 0;     // opt-in Optimization bits turned on (kOptInOptimizations)
  // Ascend only (0: the compiler's choice), with rowsPerBlock the most rows that share a UB pass:
  int64_t buffers = 0; // copies of each streamed UB buffer: 1 (single, in place) or 2 (double-buffered queues)
  int64_t chunk = 0;   // the most elements of a row per UB pass

  bool operator==(const Schedule &o) const {
    return rowsPerBlock == o.rowsPerBlock && threads == o.threads && vector == o.vector && unroll == o.unroll &&
           disabled == o.disabled && enabled == o.enabled && buffers == o.buffers && chunk == o.chunk;
  }
  /// "r1.t256.v8.u8" (".d3" appended when optimizations are off, ".e2048" when opt-in ones are on,
  /// ".b2.c4096" for Ascend's knobs): stable text for cache keys.
  std::string str() const {
    return "r" + std::to_string(rowsPerBlock) + ".t" + std::to_string(threads) + ".v" + std::to_string(vector) +
           ".u" + std::to_string(unroll) + (disabled ? ".d" + std::to_string(disabled) : "") +
           (enabled ? ".e" + std::to_string(enabled) : "") +
           (buffers || chunk ? ".b" + std::to_string(buffers) + ".c" + std::to_string(chunk) : "");
  }
};

/// Whether optimization `o` runs under `s`: not turned off, and turned on when it is opt-in.
inline bool optimizationOn(const Schedule &s, Optimization o) {
  return !(s.disabled & o) && (!(o & kOptInOptimizations) || (s.enabled & o));
}

enum class TargetKind { CPU, GPU, Ascend };

/// GPU: the lanes of a warp (NVIDIA's 32; the compiler's ballots and shuffles, the launch geometry and the PTX
/// emulator all count them).
constexpr int64_t kWarpSize = 32;

/// GPU: a group of rows (moe-group-rows) is at most this many consecutive members (lane i of the block's
/// warps computes member i's row; the warps split the row 32 lanes at a time); a kernel that runs groups
/// takes a block per group, and the runtime counts ceil(members / 16) groups for each index of the dims
/// before the members'. Groups of 32 gave A3's drop-and-pad data gradient at Mixtral's shape (2 slots a
/// token) half as many blocks, each walking its slots one after another: 29.6 -> 48.6 % of copy bandwidth
/// in the emulator's bound at 1024 tokens, 75.6 -> 86.0 % at 4096; DeepSeek-V3's and Qwen3's top-8 gain a
/// little at 1024 tokens and lose 2.6 points at 4096 (a token's slots cross a group boundary more often).
constexpr int64_t kRowGroupMembers = 16;

/// GPU: a row of points (moe-group-points) of a one-dim domain is a run of at most this many consecutive
/// points, a warp each; the runtime counts ceil(points / 8) runs. One batch of dot products
/// (moe-group-points' batch): a run of 32 gave A3's drop-and-pad probs kernel at DeepSeek-V3 a quarter as many
/// warps, each running four batches one after another (34 % of copy bandwidth in the emulator's bound, 86 %
/// with runs of 8 and guarded batches; runs of 4 split a token's slots over two warps and fell to 25 %).
constexpr int64_t kPointRunLength = 8;

/// The widest CPU vector: 32 lanes, a 64-byte register of 16-bit elements.
constexpr int64_t kMaxCpuVector = 32;

/// What is wrong with `s` as a schedule for `target`, naming the field ("'threads': 2048 is not in [1,
/// 1024]"), or "" when nothing is: threads in [1, 1024] (whole warps on a GPU), threads * rowsPerBlock <=
/// 1024, vector 1, 2, 4, 8 or 16 (or 32 on the CPU), unroll in [0, 64]; buffers (0, 1 or 2) and chunk (0 to
/// 2^24) on Ascend only. With `requested`, 0 also means "the compiler's choice" in every field. Header-only:
/// the compiler checks requests with it, and the LLVM-free runtime checks what it loads from bundles and the
/// disk cache by the same rules.
inline std::string scheduleProblem(const Schedule &s, TargetKind target, bool requested = false) {
  auto range = [](const char *field, int64_t v, int64_t lo, int64_t hi) {
    return std::string("'") + field + "': " + std::to_string(v) + " is not in [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]";
  };
  if ((s.buffers || s.chunk) && target != TargetKind::Ascend)
    return std::string("'") + (s.buffers ? "buffers" : "chunk") + "' is an Ascend knob (UB buffering and chunking)";
  constexpr int64_t kMaxBlockThreads = 1024; // CUDA's limit on threads per block
  int64_t least = requested ? 0 : 1;
  if (s.threads < least || s.threads > kMaxBlockThreads)
    return range("threads", s.threads, least, kMaxBlockThreads);
  if (target == TargetKind::GPU && s.threads % kWarpSize != 0)
    return "'threads': " + std::to_string(s.threads) + " is not a multiple of 32 (a warp)";
  int64_t maxRows = kMaxBlockThreads / std::max<int64_t>(s.threads, 1);
  if (s.rowsPerBlock < least || s.rowsPerBlock > maxRows)
    return range("rowsPerBlock", s.rowsPerBlock, least, maxRows) + " (threads * rowsPerBlock <= 1024)";
  if (!(requested && s.vector == 0) && s.vector != 1 && s.vector != 2 && s.vector != 4 && s.vector != 8 &&
      s.vector != 16 && !(s.vector == kMaxCpuVector && target == TargetKind::CPU))
    return "'vector': " + std::to_string(s.vector) + " is not " + (requested ? "0 (choice), " : "") +
           "1, 2, 4, 8 or 16" + (target == TargetKind::CPU ? " (or 32 on the CPU)" : "");
  if (s.unroll < 0 || s.unroll > 64)
    return range("unroll", s.unroll, 0, 64);
  if (s.disabled & ~uint32_t(kAllOptimizations))
    return "'disabled': " + std::to_string(s.disabled) + " names an unknown optimization";
  if (s.enabled & ~uint32_t(kOptInOptimizations))
    return "'enabled': " + std::to_string(s.enabled) + " names an optimization that is not opt-in (the others are on "
           "unless turned off)";
  if (s.buffers < 0 || s.buffers > 2)
    return range("buffers", s.buffers, 0, 2);
  constexpr int64_t kMaxChunk = int64_t(1) << 24; // elements: beyond any UB
  if (s.chunk < 0 || s.chunk > kMaxChunk)
    return range("chunk", s.chunk, 0, kMaxChunk);
  return "";
}

} // namespace moec
