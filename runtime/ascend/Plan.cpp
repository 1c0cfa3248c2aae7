//===- Plan.cpp - The per-call part of an Ascend plan: the core split and the work ---===//
#include "moec/runtime/ascend/Plan.h"

#include "moec/dsl/Eval.h"
#include "moec/dsl/KernelPlan.h"
#include "moec/runtime/Binding.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace moec::ascend {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return a == 0 ? 0 : (a - 1) / b + 1; }

/// The work of a core that runs `rows` rows of `t`, `rowsPerPass` at a time; its row-invariant values
/// are copied a pass at a time, or read as scalars with `scalarRowValues`.
CoreWork coreWork(const KernelTiling &t, const Chip &chip, int64_t begin, int64_t rows, int64_t live,
                  int64_t rowsPerPass, bool scalarRowValues, const std::vector<int64_t> &groupRows) {
  CoreWork w;
  w.rows = rows;
  w.liveRows = live;
  w.bufferCount = t.bufferCount;
  int64_t groups = ceilDiv(rows, rowsPerPass);
  w.passes = checkedMul(groups, t.chunks);
  // A pass moves its consecutive rows' data only if one of them is live: at most one copy per live row.
  int64_t livePasses = std::min(w.passes, checkedMul(live, t.chunks));
  w.dataCopies = checkedAdd(checkedMul(checkedMul(live, t.chunks), t.rowCopiesPerChunk),
                            checkedMul(livePasses, t.passCopiesPerChunk));
  if (scalarRowValues)
    w.scalarReads = checkedMul(rows, t.rowScalars);
  else
    w.dataCopies = checkedAdd(w.dataCopies, checkedMul(groups, t.passCopies));
  w.gmBytes = checkedAdd(checkedMul(live, t.rowBytes), checkedMul(rows - live, deadRowBytes(t)));
  // Kept inputs: one copy per group of rows sharing their GM row that this core's rows [begin, end) touch
  // (and no more than its live rows). The UB keeps the row across rows when it is one chunk or the buffer
  // holds whole rows; otherwise each row's chunks replace it, and every live row copies it (as the tiled
  // kernels do).
  for (size_t i = 0; i < t.buffers.size() && rows > 0; ++i) {
    const UbBuffer &b = t.buffers[i];
    if (b.reuseDims == 0)
      continue;
    int64_t group = i < groupRows.size() ? std::max<int64_t>(1, groupRows[i]) : 1;
    int64_t groups =
        t.chunks > 1 && !b.wholeRow ? live : std::min(live, (begin + rows - 1) / group - begin / group + 1);
    w.dataCopies = checkedAdd(w.dataCopies, checkedMul(checkedMul(groups, t.chunks), b.copiesPerChunk));
    w.gmBytes = checkedAdd(w.gmBytes,
                           checkedMul(checkedMul(groups, b.copiesPerChunk), checkedMul(t.rowLength, b.elementBytes)));
  }
  w.costNs = rows == 0 ? 0 : coreCostNs(chip, w);
  return w;
}

} // namespace

KernelPlan planKernel(const KernelTiling &tiling, const Chip &chip, int64_t rows, int64_t liveRows,
                      const std::vector<int64_t> &groupRows) {
  if (rows < 0)
    throw std::invalid_argument("ascend plan: kernel " + tiling.kernel + " has " + std::to_string(rows) + " rows");
  if (liveRows < 0 || !tiling.guardedRows)
    liveRows = rows;
  if (liveRows > rows)
    throw std::invalid_argument("ascend plan: kernel " + tiling.kernel + " has " + std::to_string(rows) +
                                " rows, not " + std::to_string(liveRows) + " live ones");
  KernelPlan p;
  p.tiling = tiling;
  p.rows = rows;
  p.liveRows = liveRows;
  // Live rows spread evenly: a core with n rows has ceil(n * live / rows) of them (never fewer than its share).
  auto liveOf = [&](int64_t coreRows) {
    return rows == 0 ? 0 : std::min(coreRows, ceilDiv(checkedMul(coreRows, liveRows), rows));
  };
  int64_t cores = std::max<int64_t>(1, std::min(rows, chip.vectorCores));
  p.blockDim = cores;
  // The first rows % cores cores take one row more: the busiest core has ceil(rows / cores), as few as any
  // split can give it, and every launched core has work.
  p.rowsPerTailCore = rows / cores;
  p.formerCores = rows % cores;
  p.rowsPerFormerCore = p.rowsPerTailCore + (p.formerCores ? 1 : 0);
  p.tailCores = cores - p.formerCores;
  if (p.formerCores == 0) { // every core takes the same: report them all as former cores, as CANN does
    p.formerCores = cores;
    p.tailCores = 0;
    p.rowsPerFormerCore = p.rowsPerTailCore;
    p.rowsPerTailCore = 0;
  }
  // Rows per pass and how a pass's row-invariant values arrive (a DataCopy per tensor, or scalar loads),
  // whichever costs the busiest core least: more rows per pass make fewer copies, but double-buffered
  // passes overlap only when there are several. Candidates: the most that fit, then halvings; a tie keeps
  // more rows.
  int64_t most = std::max<int64_t>(1, std::min(tiling.maxRowsPerPass, p.rowsPerFormerCore));
  std::vector<int64_t> candidates{most};
  for (int64_t rows = int64_t(std::bit_floor(uint64_t(most))); rows >= 1; rows /= 2)
    if (rows < most)
      candidates.push_back(rows);
  double best = 0;
  for (int64_t rows : candidates)
    for (bool scalar : {false, true}) {
      if (scalar && tiling.passCopies == 0)
        continue;
      double cost =
          coreWork(tiling, chip, 0, p.rowsPerFormerCore, liveOf(p.rowsPerFormerCore), rows, scalar, groupRows).costNs;
      if (p.rowsPerPass == 0 || cost < best) {
        best = cost;
        p.rowsPerPass = rows;
        p.scalarRowValues = scalar;
      }
    }
  p.ubBytesUsed = ubBytes(tiling, p.rowsPerPass, chip.ubAlignment);
  for (int64_t c = 0, begin = 0; c < cores; ++c) {
    int64_t coreRows = c < p.formerCores ? p.rowsPerFormerCore : p.rowsPerTailCore;
    p.cores.push_back(
        coreWork(tiling, chip, begin, coreRows, liveOf(coreRows), p.rowsPerPass, p.scalarRowValues, groupRows));
    begin += coreRows;
    p.costNs = std::max(p.costNs, p.cores.back().costNs);
  }
  return p;
}

Plan planOp(const PlanRequest &request, const Chip &chip, const std::vector<KernelTiling> &tilings,
            const std::vector<std::vector<const dsl::Expr *>> &domains, const std::vector<std::string> &workspace) {
  const dsl::OpDef &op = *request.op;
  Plan plan;
  plan.op = op.name;
  plan.chip = chip.name;
  plan.dtype = dsl::dtypeName(request.dtype);
  plan.dims = request.dims;
  plan.attrs = request.attrs;
  dsl::Bindings b;
  for (const auto &[name, value] : request.dims)
    if (value < 0)
      throw std::invalid_argument(op.name + ": dim '" + name + "' must be >= 0, got " + std::to_string(value));
  b.values = request.dims;
  for (const dsl::AttrDecl &a : op.attrs) {
    auto it = request.attrs.find(a.name);
    if (it == request.attrs.end() && !a.defaultValue)
      throw std::invalid_argument(op.name + ": attribute '" + a.name + "' needs a value (--attr " + a.name + "=...)");
    int64_t v = it != request.attrs.end() ? it->second : *a.defaultValue;
    plan.attrs[a.name] = b.values[a.name] = b.values[a.innerName()] = v;
  }
  for (const dsl::TensorDecl &t : op.tensors)
    b.present[t.name] = !t.optional || request.present.count(t.name);
  bindHostLets(op.body, b);
  auto eval = [&](const dsl::Expr &e) {
    try {
      return dsl::evalInt(e, b);
    } catch (const dsl::EvalError &error) {
      throw std::invalid_argument(op.name + ": " + error.what() + " (give every dim with --dim NAME=VALUE)");
    }
  };
  plan.tilingKey = tilingKey(op, request.dtype, plan.attrs, request.present);
  plan.workspaceBytes = chip.systemWorkspaceBytes;
  for (const std::string &output : workspace) {
    const dsl::TensorDecl *t = op.findTensor(output);
    int64_t rows = 1;
    for (size_t d = 0; t && d + 1 < t->shape.size(); ++d)
      rows = checkedMul(rows, eval(*t->shape[d].size));
    plan.workspaceBytes = checkedAdd(plan.workspaceBytes, alignUp(rows, dsl::kWorkspaceAlignment));
  }
  for (size_t k = 0; k < tilings.size() && k < domains.size(); ++k) {
    size_t dims = tilings[k].pointRows ? domains[k].size() : domains[k].size() - 1;
    std::vector<int64_t> extents;
    for (size_t d = 0; d < dims; ++d)
      extents.push_back(eval(*domains[k][d]));
    int64_t rows = 1;
    for (int64_t e : extents)
      rows = checkedMul(rows, e);
    std::vector<int64_t> groupRows; // per buffer: the rows that share a kept input's GM row
    for (const UbBuffer &b : tilings[k].buffers) {
      int64_t group = 1;
      for (int64_t d = 0; d < b.reuseDims && d < int64_t(extents.size()); ++d)
        group = checkedMul(group, extents[extents.size() - 1 - size_t(d)]);
      groupRows.push_back(group);
    }
    auto live = request.liveRows.find(tilings[k].kernel);
    plan.kernels.push_back(
        planKernel(tilings[k], chip, rows, live == request.liveRows.end() ? -1 : live->second, groupRows));
  }
  plan.launches = planLaunches(chip, plan.kernels);
  for (const LaunchPlan &l : plan.launches)
    plan.costNs += l.costNs;
  return plan;
}

std::vector<LaunchPlan> planLaunches(const Chip &chip, std::vector<KernelPlan> &kernels) {
  const bool staged = chip.syncAllNs < chip.coreLaunchNs;
  std::vector<LaunchPlan> launches;
  for (KernelPlan &k : kernels) {
    if (launches.empty() || !staged)
      launches.emplace_back();
    LaunchPlan &l = launches.back();
    k.launch = int64_t(launches.size()) - 1;
    k.stage = int64_t(l.kernels.size());
    l.kernels.push_back(k.tiling.kernel);
    if (k.rows == 0) // no core starts it: no stage, no barrier
      continue;
    l.syncAlls += l.blockDim > 0; // a stage ran before this one
    l.blockDim = std::max(l.blockDim, k.blockDim);
    l.costNs += k.costNs - chip.coreLaunchNs;
  }
  for (LaunchPlan &l : launches)
    if (l.blockDim > 0)
      l.costNs += chip.coreLaunchNs + double(l.syncAlls) * chip.syncAllNs;
  return launches;
}

int64_t tilingKey(const dsl::OpDef &op, dsl::DType dtype, const std::map<std::string, int64_t> &attrs,
                  const std::set<std::string> &present) {
  std::vector<bool> switches;
  auto value = [&](const dsl::AttrDecl &a) {
    auto it = attrs.find(a.name);
    return it != attrs.end() ? it->second : a.defaultValue.value_or(0);
  };
  auto isSwitch = [](const dsl::AttrDecl &a) { return a.isBool || a.defaultValue == int64_t(0); };
  for (bool wantStatic : {true, false})
    for (const dsl::AttrDecl &a : op.attrs)
      if (a.isStatic == wantStatic && isSwitch(a))
        switches.push_back(value(a) != 0);
  for (const dsl::TensorDecl &t : op.tensors)
    if (t.optional && !t.isOutput)
      switches.push_back(present.count(t.name) > 0);
  if (switches.size() > 16)
    throw std::invalid_argument("ascend plan: op " + op.name + " has more than 16 mode switches for its tiling key");
  int64_t key = 1; // the leading 1, above one digit per switch and the dtype digit
  for (bool on : switches)
    key = key * 10 + (on ? 1 : 0);
  int64_t dtypeDigit = dtype == dsl::DType::F16 ? 1 : dtype == dsl::DType::BF16 ? 2 : 0;
  return key * 10 + dtypeDigit;
}

} // namespace moec::ascend
