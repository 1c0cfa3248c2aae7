//===- PlanOutput.cpp - An Ascend plan as a table, as JSON, as a C header ---===//
#include "moec/runtime/ascend/Plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace moec::ascend {
namespace {

/// "moe_init_routing_v2_grad" -> "MoeInitRoutingV2Grad", the CANN spelling of an op's name.
std::string camel(const std::string &name) {
  std::string out;
  bool upper = true;
  for (char c : name) {
    if (c == '_' || c == '.' || c == '-') {
      upper = true;
      continue;
    }
    out += upper ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

std::string valuesText(const std::map<std::string, int64_t> &values) {
  std::string text;
  for (const auto &[name, value] : values)
    text += fmt::format("{}{}={}", text.empty() ? "" : " ", name, value);
  return text.empty() ? "-" : text;
}

/// The TilingData fields of one kernel, in the header's order.
std::vector<std::pair<const char *, int64_t>> tilingFields(const Plan &plan, const KernelPlan &k) {
  const KernelTiling &t = k.tiling;
  return {{"tilingKey", plan.tilingKey},          {"blockDim", k.blockDim},
          {"rows", k.rows},                        {"formerCoreNum", k.formerCores},
          {"rowsPerFormerCore", k.rowsPerFormerCore}, {"tailCoreNum", k.tailCores},
          {"rowsPerTailCore", k.rowsPerTailCore},  {"rowLength", t.rowLength},
          {"chunkElements", t.chunk},              {"chunkLoops", t.chunks},
          {"lastChunkElements", t.rowLength - (t.chunks - 1) * t.chunk},
          {"bufferNum", t.bufferCount},            {"rowsPerPass", k.rowsPerPass},
          {"ubBytes", k.ubBytesUsed},              {"workspaceBytes", plan.workspaceBytes},
          {"launchIndex", k.launch},               {"stage", k.stage}};
}

} // namespace

std::string planTable(const Plan &plan) {
  std::string out = fmt::format("{} {} on {}: tiling key {}, workspace {} B, cost {:.2f} us\n", plan.op, plan.dtype,
                                plan.chip, plan.tilingKey, plan.workspaceBytes, plan.costNs / 1000);
  out += fmt::format("  dims: {}; attrs: {}\n", valuesText(plan.dims), valuesText(plan.attrs));
  out += "  config: " + (plan.tunedFrom.empty() ? plan.config : plan.config + " (tuned: " + plan.tunedFrom + ")") + "\n";
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const LaunchPlan &l = plan.launches[i];
    out += fmt::format("  launch {}: blockDim {}, {} SyncAll, {:.2f} us: {}\n", i, l.blockDim, l.syncAlls,
                       l.costNs / 1000, fmt::join(l.kernels, ", "));
  }
  for (const KernelPlan &k : plan.kernels) {
    const KernelTiling &t = k.tiling;
    out += fmt::format("kernel {} (writes {}): {} {}{}\n", t.kernel, t.output, k.rows,
                       t.pointRows ? "points (a reduction along each)" : "rows",
                       t.guardedRows ? fmt::format(", {} of them live", k.liveRows) : "");
    auto row = [&](const std::string &field, const std::string &value) {
      out += fmt::format("  {:<22} {}\n", field, value);
    };
    row("blockDim", std::to_string(k.blockDim));
    row("rows per core", k.tailCores ? fmt::format("{} cores x {}, {} cores x {}", k.formerCores, k.rowsPerFormerCore,
                                                   k.tailCores, k.rowsPerTailCore)
                                     : fmt::format("{} cores x {}", k.formerCores, k.rowsPerFormerCore));
    row("row chunks", fmt::format("{} x {} elements (row of {})", t.chunks, t.chunk, t.rowLength));
    row("rows per UB pass", std::to_string(k.rowsPerPass));
    row("buffers", std::to_string(t.bufferCount) + (t.bufferCount > 1 ? " (double buffering)" : ""));
    row("row-invariant values", k.scalarRowValues ? "scalar loads" : "a DataCopy per pass");
    row("UB used", fmt::format("{} B", k.ubBytesUsed));
    for (const UbBuffer &b : t.buffers)
      row("  " + b.name(), b.elementBytes
                             ? fmt::format("{} B/element x {}{}{}", b.elementBytes, b.copies,
                                           b.perRowOfPass ? " per row of the pass" : "",
                                           b.reuseDims ? (b.wholeRow ? ", kept whole across the rows that share it"
                                                                     : ", kept across the rows that share it")
                                                       : "")
                             : fmt::format("{} B per row", b.fixedBytesPerRow));
    if (!k.cores.empty()) {
      const CoreWork &busiest = *std::max_element(k.cores.begin(), k.cores.end(),
                                                  [](const CoreWork &a, const CoreWork &b) { return a.costNs < b.costNs; });
      row("busiest core", fmt::format("{} rows, {} passes, {} DataCopy, {} scalar loads, {} B", busiest.rows,
                                      busiest.passes, busiest.dataCopies, busiest.scalarReads, busiest.gmBytes));
    }
    row("cost", fmt::format("{:.2f} us as a launch of its own", k.costNs / 1000));
    row("runs in", fmt::format("launch {}, stage {}", k.launch, k.stage));
  }
  return out;
}

nlohmann::json planToJson(const Plan &plan) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelPlan &k : plan.kernels) {
    nlohmann::json cores = nlohmann::json::array();
    for (const CoreWork &c : k.cores)
      cores.push_back({{"rows", c.rows}, {"live_rows", c.liveRows}, {"passes", c.passes}, {"data_copies", c.dataCopies},
                       {"scalar_reads", c.scalarReads}, {"gm_bytes", c.gmBytes}, {"cost_ns", c.costNs}});
    nlohmann::json kernel = tilingToJson(k.tiling);
    kernel.update({{"rows", k.rows}, {"live_rows", k.liveRows}, {"block_dim", k.blockDim}, {"former_cores", k.formerCores},
                   {"rows_per_former_core", k.rowsPerFormerCore}, {"tail_cores", k.tailCores},
                   {"rows_per_tail_core", k.rowsPerTailCore}, {"rows_per_pass", k.rowsPerPass},
                   {"scalar_row_values", k.scalarRowValues}, {"ub_bytes_used", k.ubBytesUsed}, {"cores", cores},
                   {"cost_ns", k.costNs}, {"launch", k.launch}, {"stage", k.stage}});
    kernels.push_back(std::move(kernel));
  }
  nlohmann::json launches = nlohmann::json::array();
  for (const LaunchPlan &l : plan.launches)
    launches.push_back(
        {{"kernels", l.kernels}, {"block_dim", l.blockDim}, {"sync_alls", l.syncAlls}, {"cost_ns", l.costNs}});
  return {{"format", 1}, {"op", plan.op}, {"chip", plan.chip}, {"dtype", plan.dtype}, {"dims", plan.dims},
          {"attrs", plan.attrs}, {"tiling_key", plan.tilingKey}, {"workspace_bytes", plan.workspaceBytes},
          {"cost_ns", plan.costNs}, {"config", plan.config}, {"tuned_from", plan.tunedFrom}, {"kernels", kernels},
          {"launches", launches}};
}

namespace {

/// The C header of `plan`'s kernels: a TilingData struct each, and with `values` an instance holding the
/// plan's. Both headers of an op share the guard: the structs are the same.
std::string header(const Plan &plan, const std::string &comment, bool values) {
  std::string op = camel(plan.op);
  std::string guard = "MOEC_ASCEND_" + plan.op + "_TILING_H";
  std::transform(guard.begin(), guard.end(), guard.begin(), [](unsigned char c) { return std::toupper(c); });
  std::string out = "// " + comment + " Do not edit.\n";
  out += fmt::format("#ifndef {0}\n#define {0}\n\n#include <stdint.h>\n\n", guard);
  for (const KernelPlan &k : plan.kernels) {
    std::string type = op + "_" + camel(k.tiling.kernel.substr(k.tiling.kernel.rfind("__") == std::string::npos
                                                                    ? 0
                                                                    : k.tiling.kernel.rfind("__") + 2)) +
                       "_TilingData";
    std::vector<std::pair<const char *, int64_t>> fields = tilingFields(plan, k);
    out += fmt::format("typedef struct {{\n");
    for (const auto &[name, value] : fields)
      out += fmt::format("  int64_t {};\n", name);
    out += fmt::format("}} {};\n\n", type);
    if (!values)
      continue;
    out += fmt::format("static const {} k{} = {{", type, type);
    for (size_t i = 0; i < fields.size(); ++i)
      out += fmt::format("{}{}", i ? ", " : "", fields[i].second);
    out += "};\n\n";
  }
  out += fmt::format("#endif // {}\n", guard);
  return out;
}

} // namespace

std::string planHeader(const Plan &plan) {
  return header(plan,
                fmt::format("Generated by `moec plan`: {} {} on {} ({}; {}).", plan.op, plan.dtype, plan.chip,
                            valuesText(plan.dims), valuesText(plan.attrs)),
                true);
}

std::string tilingHeader(const std::string &op, const std::string &chip, const std::vector<KernelTiling> &tilings) {
  Plan plan;
  plan.op = op;
  for (const KernelTiling &t : tilings)
    plan.kernels.emplace_back().tiling = t;
  return header(plan,
                fmt::format("Generated by `moec emit`: the TilingData structs of {}'s kernels on {}; each call's "
                            "values come from its plan (`moec plan --header`, or the runtime's).",
                            op, chip),
                false);
}

} // namespace moec::ascend
