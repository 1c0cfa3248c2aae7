//===- Plan.h - Ascend tiling plans: the per-chip tiling and the per-call split -*- C++ -*-===//
//
// An Ascend kernel comes with a host-side plan, as CANN's tiling functions make one:
//   * how many vector cores run (blockDim) and how the rows are split across them (the first
//     `formerCores` take one row more than the others, so no core is idle while another has two more);
//   * how a row is chunked to fit the Unified Buffer: `chunk` elements per UB pass, 32-byte aligned
//     buffers, double buffering when it costs no extra chunk;
//   * how many rows share a UB pass when they are short (their contiguous GM data moves in one DataCopy);
//   * a tiling key naming the kernel variant, and the workspace.
// The compiler derives a KernelTiling (moec/contracts/ascend/Tiling.h) from the scheduled IR for one chip
// (moe-plan-ascend): everything that depends only on static dims. planOp() adds what depends on the call's runtime dims, cheaply, at
// launch. Cost model (coreCostNs): a core takes coreLaunchNs + scalar reads + its DataCopy set-ups and
// its GM bytes at its share of the bandwidth, the last two added when single-buffered and overlapped when
// double-buffered; a kernel takes its busiest core; an op, its launches in order. Where the chip's SyncAll
// costs less than a launch, an op's kernels are the stages of one launch with a SyncAll between them
// (planLaunches): the barrier orders them as separate launches would, for one launch's start-up.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/contracts/ascend/Tiling.h"
#include "moec/dsl/AST.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace moec::ascend {

struct KernelPlan {
  KernelTiling tiling;
  int64_t rows = 0;     // the domain's rows in this call
  int64_t liveRows = 0; // those that do their streaming work (all unless the caller said otherwise)
  int64_t blockDim = 0; // cores launched: those with rows (1 when there are none)
  int64_t formerCores = 0, rowsPerFormerCore = 0, tailCores = 0, rowsPerTailCore = 0;
  int64_t rowsPerPass = 0;
  bool scalarRowValues = false; // row-invariant values read as scalars, not copied a pass at a time
  int64_t ubBytesUsed = 0;
  std::vector<CoreWork> cores; // blockDim entries
  double costNs = 0;           // the busiest core's, as a launch of its own
  int64_t launch = 0, stage = 0; // where it runs: Plan::launches[launch].kernels[stage]
};

/// One launch of an op's kernels: they run as its stages, in order, with a SyncAll between two stages
/// (every core's writes of one stage are done before any core starts the next). A kernel without rows in
/// the call is skipped, with its barrier.
struct LaunchPlan {
  std::vector<std::string> kernels;
  int64_t blockDim = 0; // the most any stage uses; a core with no rows in a stage waits at its barrier
  int64_t syncAlls = 0;
  double costNs = 0; // one coreLaunchNs, each stage's busiest core without it, and the SyncAlls
};

/// Groups `kernels` (in order) into launches on `chip`: all into one when a SyncAll costs less than a
/// launch, else one each. Sets each kernel's `launch` and `stage`.
std::vector<LaunchPlan> planLaunches(const Chip &chip, std::vector<KernelPlan> &kernels);

/// Splits `rows` over at most `chip.vectorCores` cores and counts each core's work. With guardedRows,
/// `liveRows` (default: all) of them do their streaming work, spread evenly; the others move only their
/// row-invariant values. Throws std::overflow_error when a count does not fit int64.
/// `groupRows[i]`: for a kept input (buffers[i].reuseDims > 0), the rows that share its GM row (the
/// product of those innermost extents); otherwise ignored.
KernelPlan planKernel(const KernelTiling &tiling, const Chip &chip, int64_t rows, int64_t liveRows = -1,
                      const std::vector<int64_t> &groupRows = {});

struct Plan {
  std::string op, chip, dtype;
  std::map<std::string, int64_t> dims, attrs; // every value the plan was made for
  int64_t tilingKey = 0;
  int64_t workspaceBytes = 0; // the system workspace plus the kernels' own (one byte per row per output)
  std::vector<KernelPlan> kernels;
  std::vector<LaunchPlan> launches;
  double costNs = 0; // the launches one after another
  std::string config = "heuristic"; // the UB plan's knobs (a tuned config's text), or the compiler's choice
  std::string tunedFrom;            // the tuning file the config came from ("" when not tuned)
};

/// The tiling key: the op's mode switches as decimal digits above a dtype digit (0 f32, 1 f16, 2 bf16).
/// Switches, from the highest digit: static attributes that are bool or default to 0, in declaration
/// order; then runtime attributes that default to 0; then optional inputs (1: given). A switch's digit is
/// 1 when its value is nonzero. With n switches the key is 10^(n+1) + ... — so MoeInitRoutingV2Grad's is
/// CANN's 1000 + 100 * dropPad + 10 * active + dtype.
int64_t tilingKey(const dsl::OpDef &op, dsl::DType dtype, const std::map<std::string, int64_t> &attrs,
                  const std::set<std::string> &present);

/// What planOp needs to know about the call.
struct PlanRequest {
  const dsl::OpDef *op = nullptr;
  dsl::DType dtype = dsl::DType::F32;
  std::map<std::string, int64_t> dims;  // every dim the kernels' domains use, runtime ones included
  std::map<std::string, int64_t> attrs; // given attributes (defaults fill the rest)
  std::set<std::string> present;        // optional tensors that are there
  /// Per kernel name, how many rows pass their guard (KernelTiling::guardedRows) when the caller knows it
  /// from the routing, e.g. no rows left for a fill after a full permutation; absent: all of them.
  std::map<std::string, int64_t> liveRows;
};

/// The plan of a compiled op for one call: `tilings[i]` and `domains[i]` (KernelInfo::domain) of each
/// kernel in order, `workspace` the outputs whose rows the kernels mark (CompiledOp::workspace). Throws
/// std::invalid_argument naming a dim or attribute without a value.
Plan planOp(const PlanRequest &request, const Chip &chip, const std::vector<KernelTiling> &tilings,
            const std::vector<std::vector<const dsl::Expr *>> &domains, const std::vector<std::string> &workspace);

/// The plan as a table for people (`moec plan`).
std::string planTable(const Plan &plan);

/// The plan as versioned JSON ({"format": 1, ...}; the fields are those of Plan, KernelPlan and
/// KernelTiling in snake_case).
nlohmann::json planToJson(const Plan &plan);

/// A C header: one `<Op>_<kernel>_TilingData` struct of int64_t fields per kernel and a constexpr
/// instance holding this plan's values, as a CANN kernel reads its tiling.
std::string planHeader(const Plan &plan);

/// The same structs without values, for kernels compiled before any call's dims are known (`moec emit
/// --target ascend --dump-dir`). It shares planHeader's guard.
std::string tilingHeader(const std::string &op, const std::string &chip, const std::vector<KernelTiling> &tilings);

} // namespace moec::ascend
