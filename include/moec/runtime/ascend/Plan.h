//===- Plan.h - Ascend tiling plans: the per-chip tiling and the per-call split -*- C++ -*-===//
//
// An Ascend kernel comes with a host-side plan, as CANN's tiling functions make one:
//   * how many vector cores run (blockDim) and how the rows are split across them (the first
//     `formerCores` take one row more than the others, so no core is idle while another has two more);
//   * how a row is chunked to fit the Unified Buffer: `chunk` elements per UB pass, 32-byte aligned
//     buffers, double buffering when it costs no extra chunk;
//   * how many rows share a UB pass when they are short (their contiguous GM data moves in one DataCopy);
//   * a tiling key naming the kernel variant, and the workspace.
// The compiler derives a KernelTiling from the scheduled IR for one chip (moe-plan-ascend): everything
// that depends only on static dims. planOp() adds what depends on the call's runtime dims, cheaply, at
// launch. Cost model (coreCostNs): a core takes coreLaunchNs + scalar reads + its DataCopy set-ups and
// its GM bytes at its share of the bandwidth, the last two added when single-buffered and overlapped when
// double-buffered; a kernel takes its busiest core; an op, its launches in order. Where the chip's SyncAll
// costs less than a launch, an op's kernels are the stages of one launch with a SyncAll between them
// (planLaunches): the barrier orders them as separate launches would, for one launch's start-up.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/dsl/AST.h"
#include "moec/runtime/ascend/Chip.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace moec::ascend {

/// One buffer in a core's UB. Its bytes for a pass of `rows` rows and `chunk` elements per row are
/// copies * align(elementBytes * chunk * (perRowOfPass ? rows : 1)) + align(fixedBytesPerRow * rows), with
/// the row's length in place of `chunk` for a kept input that holds whole rows.
struct UbBuffer {
  std::string name;         // "in.grad_expanded_x", "out.grad_x", "acc.f32", "idx.expanded_row_idx"
  int64_t elementBytes = 0; // per element of the chunk; 0 for a buffer of row-invariant values
  int64_t copies = 1;       // 2: a double-buffered queue
  bool perRowOfPass = false; // holds every row of the pass, not one at a time
  int64_t fixedBytesPerRow = 0;
  // An input kept across rows that share its GM row: those that differ only in the `reuseDims` innermost
  // row indices. It is copied `copiesPerChunk` times per such group and chunk (0, 0: every row's copies
  // are in KernelTiling::rowCopiesPerChunk and rowBytes instead).
  int64_t reuseDims = 0;
  int64_t copiesPerChunk = 0;
  // A kept input that holds its whole row (every chunk of it): a row of several chunks is still copied
  // once per group of rows that share it, chunk by chunk, by the group's first live row.
  bool wholeRow = false;
};

/// A kernel's tiling for one chip: what the compiler derives from the scheduled IR.
struct KernelTiling {
  std::string kernel;         // the kernel's entry name
  std::string output;         // the tensor it writes
  int64_t rowLength = 0;      // elements each row streams along its contiguous dim
  int64_t chunk = 0;          // elements of a row per UB pass
  int64_t chunks = 0;         // ceil(rowLength / chunk)
  int64_t bufferCount = 1;    // 2: copy-in, compute and copy-out overlap
  int64_t maxRowsPerPass = 1; // rows that fit the UB together (chunks == 1 only)
  bool pointRows = false;     // rows are the domain's points (a reduction along the contiguous dim)
  bool guardedRows = false;   // a row's streaming work runs only when a condition of the row holds
  std::vector<UbBuffer> buffers;
  // What a row moves, for DataCopy counts and the cost model:
  int64_t rowCopiesPerChunk = 0;  // DataCopy calls per row and chunk: gathered rows, scattered output rows
  int64_t passCopiesPerChunk = 0; // per pass and chunk: streams (and outputs) whose rows are consecutive
  int64_t passCopies = 0;         // per pass: row-invariant values (indices, probs), one copy per tensor
  int64_t rowScalars = 0;         // row-invariant values per row (read as scalars when that is cheaper)
  int64_t rowBytes = 0;           // GM bytes one row moves, streams, output and row-invariant values
};

/// The UB bytes `t` uses with `rows` rows in a pass, each buffer aligned to `alignment`.
int64_t ubBytes(const KernelTiling &t, int64_t rows, int64_t alignment);

/// One vector core's share of a kernel.
struct CoreWork {
  int64_t rows = 0;
  int64_t liveRows = 0;
  int64_t passes = 0;     // UB passes (row groups times chunks)
  int64_t dataCopies = 0; // GM <-> UB DataCopy calls
  int64_t scalarReads = 0; // scalar GM loads (row-invariant values read one at a time)
  int64_t gmBytes = 0;
  int64_t bufferCount = 1; // the tiling's: 2 when its queues are double-buffered
  double costNs = 0;
};

/// A core's time in ns: coreLaunchNs + scalarReads * scalarReadNs + its streaming, where copyNs =
/// dataCopies * dataCopyNs (each DataCopy's fixed set-up) and moveNs = gmBytes / gmGBpsPerCore.
/// Single-buffered, a pass copies in, computes, then copies out: copyNs + moveNs. Double-buffered, one
/// queue's set-ups overlap the other queue's data: max(copyNs, moveNs), plus min(copyNs, moveNs) / passes
/// for the first pass's copy-in and the last's copy-out, which have nothing to hide behind. (The vector
/// work of these ops is a few instructions per element and is taken to hide behind the moves.)
double coreCostNs(const Chip &chip, const CoreWork &work);

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

/// The chip's bandwidth bound on moving `bytes`: coreLaunchNs plus the bytes spread over every vector
/// core at gmGBpsPerCore, no DataCopy set-up counted. What autotuning sets a plan's cost against, as a
/// same-run copy on the CPU or a GPU.
double copyBoundNs(const Chip &chip, double bytes);

/// The GM bytes of a row whose guard fails: its row-invariant values (and a point's output) only.
int64_t deadRowBytes(const KernelTiling &t);

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

/// A kernel's tiling as JSON (the fields of KernelTiling in snake_case): what `moec emit-all` writes for
/// the ascend target, where no call's dims are known yet.
nlohmann::json tilingToJson(const KernelTiling &tiling);

/// The tiling written by tilingToJson, every field checked (ranges, chunks = ceil(rowLength / chunk),
/// buffers within `chip`'s UB and copy limit). Throws std::runtime_error naming `where` and the field.
KernelTiling tilingFromJson(const nlohmann::json &j, const Chip &chip, const std::string &where);

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
