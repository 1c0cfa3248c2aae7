//===- PlanCommand.cpp - moec plan: an op's Ascend tiling plan for one call --===//
//
//   moec plan OP --target ascend --chip 910b --dtype bf16 --dim N=4096 --dim H=7168 --attr top_k=8
// compiles OP for the chip (moe-plan-ascend gives each kernel's tiling), adds the core split for the
// call's dims, prints the plan as a table, and writes it as JSON (--json) and as a C header of TilingData
// structs (--header). Every dim the kernels use is needed, runtime ones included: a plan, like CANN's
// tiling, depends on the call's shapes. The UB plan's knobs come from --config, else from the tuning file
// `moec tune --target ascend` left for the call's token bucket, else from the compiler.
//===----------------------------------------------------------------------===//
#include "Api.h"
#include "Commands.h"
#include "Common.h"

#include "moec/contracts/NearestName.h"
#include "moec/jit/Autotuning.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/DiskCache.h"
#include "moec/runtime/ascend/Plan.h"
#include "moec/tune/ConfigSpace.h"

#include <fmt/core.h>

#include <algorithm>

namespace moec::cli {

ascend::Plan makePlan(const PlanOptions &o) {
  std::unique_ptr<dsl::OpDef> op = loadOp(o.op);
  ascend::Chip chip = o.chip.load();
  ascend::PlanRequest request;
  request.op = op.get();
  request.dtype = parseDType(o.dtype);
  request.present = presentTensors(*op, o.with);
  Specialization spec;
  spec.dtype = request.dtype;
  spec.target = Target::ascend(chip);
  spec.present = request.present;
  for (const auto &[name, value] : parseAssignments(o.dims, "--dim")) {
    const dsl::DimDecl *dim = op->findDim(name);
    if (!dim)
      throw CLI::ValidationError("--dim", "'" + name + "' is not a dim of " + op->name +
                                              didYouMean(name, op->dimNames(false)));
    request.dims[name] = value;
    if (dim->isStatic)
      spec.statics[name] = value;
  }
  for (const auto &[name, value] : parseAssignments(o.attrs, "--attr")) {
    const dsl::AttrDecl *attr = op->findAttr(name);
    if (!attr)
      throw CLI::ValidationError("--attr", "'" + name + "' is not an attribute of " + op->name +
                                               didYouMean(name, op->attrNames(false)));
    request.attrs[attr->name] = value;
    if (attr->isStatic)
      spec.statics[name] = value;
  }
  std::string tunedFrom;
  if (!o.config.empty()) {
    try {
      spec.schedule = tune::parseConfig(o.config);
    } catch (const std::invalid_argument &e) {
      throw CLI::ValidationError("--config", e.what());
    }
  } else if (autotuneFromEnv()) { // a tuned config for the call's tokens, as AscendPlanner::plan uses
    auto warn = [](const std::string &line) { fmt::print(stderr, "moec: warning: {}\n", line); };
    tune::TuningDb db(defaultCacheDir() / "tuning", warn);
    tune::TuningKey key = tuningKey(*op, resolve(*op, spec));
    std::string path = (db.dir() / key.fileName()).string();
    std::optional<tune::TuningFile> file = db.load(key);
    std::optional<int64_t> tokens = tokensIn(*op, request.dims);
    if (file && tokens)
      if (std::optional<Schedule> config = tunedConfigOf(*file, *tokens, TargetKind::Ascend, path, warn)) {
        spec.schedule = *config;
        tunedFrom = path;
      }
  }
  CompiledOp compiled = compile(*op, spec);
  std::vector<std::vector<const dsl::Expr *>> domains;
  for (const KernelInfo &k : compiled.kernels)
    domains.push_back(k.domain);
  for (const auto &[name, value] : parseAssignments(o.liveRows, "--live-rows")) {
    auto kernel = std::find_if(compiled.kernels.begin(), compiled.kernels.end(),
                               [&](const KernelInfo &k) { return k.name == name; });
    if (kernel == compiled.kernels.end())
      throw CLI::ValidationError("--live-rows", "'" + name + "' is not a kernel of this specialization");
    request.liveRows[name] = value;
  }
  ascend::Plan plan = ascend::planOp(request, chip, compiled.ascend, domains, compiled.workspace);
  plan.config = tune::configText(spec.schedule);
  plan.tunedFrom = tunedFrom;
  return plan;
}

namespace {

void runPlan(const PlanOptions &o) {
  ascend::Plan plan = makePlan(o);
  fmt::print("{}", ascend::planTable(plan));
  if (!o.json.empty())
    writeFile(o.json, ascend::planToJson(plan).dump(2) + "\n");
  if (!o.header.empty())
    writeFile(o.header, ascend::planHeader(plan));
}

} // namespace

void registerPlanCommand(CLI::App &app) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App *cmd = app.add_subcommand("plan", "Print an op's Ascend tiling plan for one call; write it as JSON and a C header");
  cmd->add_option("op", o->op, "built-in op name or .moe file")->required();
  cmd->add_option("--target", o->target, "ascend (the only target with plans)")
      ->check(CLI::IsMember({"ascend"}))
      ->capture_default_str();
  o->chip.add(*cmd);
  cmd->add_option("--dtype", o->dtype, "element type of the op's type parameter: f16, bf16, f32")->capture_default_str();
  cmd->add_option("--dim", o->dims, "NAME=VALUE for every dim the kernels use, runtime ones included (repeatable)");
  cmd->add_option("--attr", o->attrs, "NAME=VALUE for an attribute (repeatable)");
  cmd->add_option("--with", o->with, "an optional input the call passes (repeatable)");
  cmd->add_option("--live-rows", o->liveRows,
                  "KERNEL=N: of a kernel whose rows are guarded, how many do their work (the routing's; "
                  "default: all) (repeatable)");
  cmd->add_option("--config", o->config,
                  "the UB plan's knobs, as moec tune writes them: buffers=2,chunk=4096,rows=64 (default: the tuned "
                  "config of the call's tokens when `moec tune --target ascend` left one, else the compiler's)");
  cmd->add_option("--json", o->json, "write the plan as JSON here");
  cmd->add_option("--header", o->header, "write the plan's TilingData structs as a C header here");
  cmd->callback([o] { runPlan(*o); });
}

} // namespace moec::cli
