//===- Tiling.h - An Ascend kernel's tiling and the cost model, the compiler's and the runtime's -*- C++ -*-===//
//
// A contract: the compiler derives a KernelTiling from the scheduled IR (moe-plan-ascend) and prices its
// choices with coreCostNs; the runtime plans each call from it (moec/runtime/ascend/Plan.h); emit-all and
// bundles carry it as JSON.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/contracts/ascend/Chip.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moec::ascend {

/// What a UB buffer holds. The lowering decides by it where a buffer is placed and what it is viewed as;
/// its prefix ("in", "out", ...) starts the buffer's name in the tiling JSON, the plan tables and the IR.
enum class UbRole {
  Input,       // "in.<tensor>": a row (chunk) of an input streamed along the row
  Output,      // "out.<tensor>": the output's row (chunk), or a point row's one value per row
  RowStore,    // "row.<tensor>": a point row's fused row store (moe.row_store), copied out per chunk
  Accumulator, // "acc.f32": the reduction's accumulators along the row
  Index,       // "idx.<tensor>": a tensor's row-invariant values (indices, probs), copied once per pass
  Cast,        // "cast.f32": the f32 copy of a narrower input that a reduction reads
};

/// The prefix of `role`'s buffer names: "in", "out", "row", "acc", "idx" or "cast".
const char *ubRolePrefix(UbRole role);
/// The role whose prefix is `prefix`, if one is.
std::optional<UbRole> ubRoleFromPrefix(std::string_view prefix);

/// One buffer in a core's UB. Its bytes for a pass of `rows` rows and `chunk` elements per row are
/// copies * align(elementBytes * chunk * (perRowOfPass ? rows : 1)) + align(fixedBytesPerRow * rows), with
/// the row's length in place of `chunk` for a kept input that holds whole rows.
struct UbBuffer {
  UbRole role = UbRole::Input;
  std::string tensor;       // the tensor it holds; for an accumulator or cast buffer, its element type ("f32")
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

  /// "<prefix>.<tensor>" ("in.grad_expanded_x", "acc.f32"): how files, tables and moe.ub_alloc name it.
  std::string name() const { return std::string(ubRolePrefix(role)) + "." + tensor; }
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

/// The chip's bandwidth bound on moving `bytes`: coreLaunchNs plus the bytes spread over every vector
/// core at gmGBpsPerCore, no DataCopy set-up counted. What autotuning sets a plan's cost against, as a
/// same-run copy on the CPU or a GPU.
double copyBoundNs(const Chip &chip, double bytes);

/// The GM bytes of a row whose guard fails: its row-invariant values (and a point's output) only.
int64_t deadRowBytes(const KernelTiling &t);

/// A kernel's tiling as JSON (the fields of KernelTiling in snake_case): what `moec emit-all` writes for
/// the ascend target, where no call's dims are known yet.
nlohmann::json tilingToJson(const KernelTiling &tiling);

/// The tiling written by tilingToJson, every field checked (ranges, chunks = ceil(rowLength / chunk),
/// buffers within `chip`'s UB and copy limit). Throws std::runtime_error naming `where` and the field.
KernelTiling tilingFromJson(const nlohmann::json &j, const Chip &chip, const std::string &where);

/// A plan's int64 arithmetic, checked: throws std::overflow_error "ascend plan: a * b overflows int64".
int64_t checkedMul(int64_t a, int64_t b);
int64_t checkedAdd(int64_t a, int64_t b);
/// `v` rounded up to a multiple of `alignment`, checked.
int64_t alignUp(int64_t v, int64_t alignment);

} // namespace moec::ascend
