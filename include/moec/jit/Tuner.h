//===- Tuner.h - Timing a space of schedules for one op specialization -*- C++ -*-===//
//
// The engine behind `moec tune`: the configs that are not pruned are compiled first, in parallel
// (through the Runtime, so the disk cache keeps them; the heuristic among them, since its outputs are the
// reference). Then, for each token count, the heuristic's kernels run once for reference outputs, and
// every compiled config is checked bit for bit against them and timed a fixed number of times (caches
// flushed before each run) against a same-run baseline, in groups whose configs run in turn, rep after
// rep, so drift in the machine's speed touches them alike. The budget bounds the timing (from the first
// reference run on), not the compiles, whose time is reported apart. A config the previous tuning file
// already timed for a bucket is not timed again.
//
// The counts: every distinct config (the heuristic included) is `considered`; each is pruned, compiled,
// failed to compile, or needs no compile (timed earlier at every token count). Each token count has one
// point per considered config, whose status says what became of it.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/jit/Runtime.h"
#include "moec/tune/ConfigSpace.h"
#include "moec/tune/TuningDb.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moec {

/// One token count's call, ready to run many times, on whatever hardware the Runtime targets.
struct TuneCall {
  std::map<std::string, TensorView> tensors; // inputs and outputs by name
  std::map<std::string, int64_t> attrs;      // runtime attributes
  double bytesMoved = 0;                     // the op's minimum traffic
  std::function<void()> baseline;            // copies the same bytes on the same hardware
  std::function<void()> poisonOutputs;       // fills the outputs with 0xFF bytes (NaN in every float type)
  std::function<std::string()> outputBytes;  // the outputs' bytes, in name order
  std::function<double(const std::function<void()> &)> secondsOf; // times one call (wall clock, CUDA events)
  std::function<void()> flush;               // evicts the caches between timed runs
  /// Set where a cost model, not the clock, ranks the configs (Ascend: the plan's cost on the chip): a
  /// config's time, once (it is deterministic), and the baseline's (the chip's bandwidth bound).
  std::function<double(const Schedule &config)> modeledSeconds;
  double modeledBaselineSeconds = 0;
};

/// A config compiled (or loaded from the disk cache) or failed, reported as each finishes, one at a time.
struct TuneCompileProgress {
  size_t done = 0, total = 0; // total: the configs to compile, the heuristic included
  std::string config;         // its text
  std::string error;          // why it did not compile; "" when it did
  double seconds = 0;         // since the compiles began
};

/// What a sweep will do, known before its first compile.
struct TunePlan {
  size_t considered = 0;   // distinct configs, the heuristic included
  size_t toCompile = 0;    // the heuristic included
  size_t timedEarlier = 0; // timed by an earlier sweep at every token count: not compiled
  std::vector<std::pair<std::string, std::string>> pruned; // config text, why
};

struct TuneOptions {
  std::vector<int64_t> tokens;   // token counts; each is timed, and stored under its bucket
  std::vector<Schedule> configs; // the candidates, in order (a target's space, a --configs file, a shard)
  int reps = 10;                 // timed runs per config: fixed, so every sweep runs the same number
  double budgetSeconds = 0;      // 0: none; else timing groups not reached in time stay untimed (a later sweep
                                 // times them). Compiles are not part of it.
  unsigned compileThreads = 0;   // 0: the hardware's threads
  const tune::TuningFile *previous = nullptr; // timings kept from earlier sweeps
  std::function<void(const TunePlan &)> planned;                     // called once, before the compiles
  std::function<void(const TuneCompileProgress &)> compileProgress; // called as each compile finishes
};

struct TunePoint {
  enum class Status { Timed, Reused, Pruned, Failed, Mismatch, Untimed };
  int64_t tokens = 0;
  Schedule config; // Schedule{}: the heuristic
  std::string text;
  Status status = Status::Untimed;
  std::string why;    // Pruned, Failed, Mismatch: the reason
  double medianUs = 0, minUs = 0, baselineUs = 0; // baselineUs: 0 when not timed in this sweep
  double bytesMoved = 0;                           // the op's minimum traffic at these tokens
};
const char *statusName(TunePoint::Status s);

/// A point settled in the timing phase: timed, reused from the previous file, mismatched or left untimed.
/// `total` counts the points of every token count that were not pruned and did compile.
struct TuneProgress {
  size_t done = 0, total = 0;
  const TunePoint *last = nullptr;
  const TunePoint *best = nullptr; // the fastest so far for last->tokens
  double etaSeconds = 0;
};

struct TuneResult {
  std::vector<TunePoint> points; // per token count: the heuristic first, then the configs in order
  tune::TuningFile file;         // the previous file (if any) plus this sweep's timings
  size_t considered = 0;         // distinct configs, the heuristic included: the points per token count
  size_t pruned = 0;             // ruled out by the shape: never compiled
  size_t compiled = 0;           // compiled or loaded from the disk cache, the heuristic included
  size_t failed = 0;             // did not compile
  size_t timedEarlier = 0;       // timed by an earlier sweep at every token count: not compiled
  double compileSeconds = 0;     // the compiles (the heuristic's included)
  double timingSeconds = 0;      // the checks and the timing: what the budget bounds
  bool budgetSpent = false;      // some points were left untimed by the budget
};

/// Runs the sweep. `rt` should not use tuned schedules itself (Options::autotune = false), so the
/// heuristic is the compiler's. Throws CompileError when the heuristic itself does not compile.
TuneResult tuneOp(Runtime &rt, const std::string &op, const KernelRequest &request, const TuneOptions &options,
                  const std::function<TuneCall &(int64_t tokens)> &callFor,
                  const std::function<void(const TuneProgress &)> &progress = {});

/// What the kernel's shape says about configs (tune::prunedBecause): its first output's last dim when
/// static, and the dtype's size; on Ascend, the chip's UB and copy limit.
tune::ShapeFacts shapeFacts(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &statics,
                            const Target &target);

} // namespace moec
