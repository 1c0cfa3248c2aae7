//===- AscendPlanner.cpp - Tilings compiled once per specialization, plans per call ---===//
#include "moec/jit/AscendPlanner.h"

#include "moec/jit/Autotuning.h"
#include "moec/tune/ConfigSpace.h"

#include "moec/BuildId.h" // generated: MOEC_BUILD_ID, a hash of the compiler sources
#include "moec/compiler/Pipeline.h"
#include "moec/contracts/Files.h"
#include "moec/dsl/KernelPlan.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/DiskCache.h"
#include "moec/runtime/KernelJson.h"

#include <nlohmann/json.hpp>

#include <iostream>

namespace moec {
namespace {

/// The static dims and attributes of `call` (by public name), as compile() takes them.
std::map<std::string, int64_t> staticsOf(const dsl::OpDef &op, const PlanCall &call) {
  std::map<std::string, int64_t> statics;
  for (const auto &[name, value] : call.dims)
    if (const dsl::DimDecl *d = op.findDim(name); d && d->isStatic)
      statics[name] = value;
  for (const auto &[name, value] : call.attrs)
    if (const dsl::AttrDecl *a = op.findAttr(name); a && a->isStatic)
      statics[a->name] = value;
  return statics;
}

} // namespace

AscendPlanner::AscendPlanner(ascend::Chip chip) : AscendPlanner(std::move(chip), Options{}) {}

AscendPlanner::AscendPlanner(ascend::Chip chip, Options opts) : chip_(std::move(chip)), options(std::move(opts)) {
  if (!options.warn)
    options.warn = [](const std::string &message) { std::cerr << "moec: warning: " << message << "\n"; };
  options.maxPlans = std::max<size_t>(1, options.maxPlans);
  disk = std::make_unique<DiskCache>(options.cacheDir.value_or(defaultCacheDir()));
  disk->setWarningHandler([warn = options.warn](const std::string &line) {
    warn(line.rfind("moec: warning: ", 0) == 0 ? line.substr(15) : line);
  });
  if (!disk->enabled())
    options.warn(disk->disabledReason() + "; caching Ascend tilings in memory only");
  if (!options.autotune)
    options.autotune = autotuneFromEnv();
  tuning = std::make_unique<tune::TuningDb>(disk->dir() / "tuning", options.warn);
}

AscendPlanner::~AscendPlanner() = default;

std::string AscendPlanner::cacheKey(const dsl::OpDef &op, const std::string &source,
                                    const ResolvedSpecialization &spec) const {
  return "moec ascend tiling cache 2\ncompiler " MOEC_BUILD_ID "\nop " + op.name + " " + contentHash(source) +
         "\ndtype " + dsl::dtypeName(spec.dtype) + "\nstatics " + nlohmann::json(spec.statics).dump() + "\npresent " +
         nlohmann::json(spec.inputs).dump() + "\nchip " + ascend::chipKeyText(chip_) +
         (spec.schedule == Schedule{} ? "" : "\nschedule " + spec.schedule.str()) + "\n";
}

std::optional<std::pair<Schedule, std::string>> AscendPlanner::tuned(const dsl::OpDef &op, const PlanCall &call,
                                                                     const ResolvedSpecialization &spec) {
  std::optional<int64_t> tokens = tokensIn(op, call.dims);
  if (!*options.autotune || !tokens)
    return std::nullopt;
  tune::TuningKey key = tuningKey(op, spec);
  std::string name = key.fileName();
  auto file = tuningFiles.find(name);
  if (file == tuningFiles.end())
    file = tuningFiles.emplace(name, tuning->load(key)).first;
  std::string path = (tuning->dir() / name).string();
  if (!file->second)
    return std::nullopt;
  if (std::optional<Schedule> config = tunedConfigOf(*file->second, *tokens, TargetKind::Ascend, path, options.warn))
    return std::pair{*config, path};
  return std::nullopt;
}

const AscendPlanner::OpSource &AscendPlanner::source(const std::string &name) {
  auto it = sources.find(name);
  if (it != sources.end())
    return it->second;
  return sources.emplace(name, loadOpWithSource(name)).first->second;
}

std::shared_ptr<const ascend::Plan> AscendPlanner::plan(const std::string &name, const PlanCall &call) {
  std::lock_guard<std::mutex> lock(mutex);
  // A call's plan is cached; only a requested schedule or known live rows lengthen its key.
  std::string byCall = requestText(name, call.dtype, call.dims, call.attrs, call.with);
  if (call.schedule != Schedule{})
    byCall += " schedule " + call.schedule.str();
  if (!call.liveRows.empty())
    byCall += " live " + nlohmann::json(call.liveRows).dump();
  if (auto hit = plansByCall.find(byCall); hit != plansByCall.end()) {
    recent.splice(recent.begin(), recent, hit->second); // most recent first
    ++planHits;
    return hit->second->second;
  }
  const OpSource &src = source(name);
  ResolvedSpecialization spec =
      resolve(*src.op, {call.dtype, staticsOf(*src.op, call), Target::ascend(chip_), call.schedule, call.with});
  std::string tunedFrom;
  if (spec.schedule == Schedule{})
    if (auto found = tuned(*src.op, call, spec)) {
      spec = spec.withSchedule(found->first);
      tunedFrom = found->second;
    }
  const Schedule &schedule = spec.schedule;
  std::string byStatics = requestText(name, call.dtype, spec.statics, {}, call.with) + " " + schedule.str();
  std::shared_ptr<const Tilings> t;
  if (auto known = tilingsByStatics.find(byStatics); known != tilingsByStatics.end()) {
    t = known->second;
    ++tilingHits;
  } else {
    t = tilings(src, cacheKey(*src.op, src.source, spec), spec);
    tilingsByStatics.emplace(byStatics, t);
  }
  ascend::PlanRequest request{t->op.get(), call.dtype, call.dims, call.attrs, call.with, call.liveRows};
  ascend::Plan plan = ascend::planOp(request, chip_, t->kernels, t->domains, t->workspace);
  plan.config = tune::configText(schedule);
  plan.tunedFrom = tunedFrom;
  auto made = std::make_shared<const ascend::Plan>(std::move(plan));
  recent.emplace_front(byCall, made);
  plansByCall[byCall] = recent.begin();
  if (recent.size() > options.maxPlans) {
    plansByCall.erase(recent.back().first);
    recent.pop_back();
  }
  return made;
}

std::shared_ptr<const AscendPlanner::Tilings> AscendPlanner::tilings(const OpSource &src, const std::string &key,
                                                                     const ResolvedSpecialization &spec) {
  std::shared_ptr<const Tilings> found = disk->enabled() ? fromDisk(src, key, spec) : nullptr;
  if (found) {
    ++diskHits;
  } else {
    CompiledOp compiled = compile(*src.op, spec);
    ++compiles;
    auto t = std::make_shared<Tilings>();
    t->op = src.op;
    t->kernels = compiled.ascend;
    for (const KernelInfo &k : compiled.kernels)
      t->domains.push_back(k.domain);
    t->workspace = compiled.workspace;
    DiskCache::Entry entry;
    entry.keyText = key;
    nlohmann::json records = nlohmann::json::array();
    for (const ascend::KernelTiling &k : t->kernels)
      records.push_back(ascend::tilingToJson(k));
    entry.files = {{"op.moe", src.source}, {"tiling.json", records.dump(2) + "\n"}};
    entry.meta["workspace"] = t->workspace;
    if (disk->enabled())
      disk->store(cacheKeyHash(key), entry);
    found = t;
  }
  return found;
}

/// The entry's tilings, each checked (tilingFromJson) and matched by name to a kernel the op plans for
/// this specialization, in order; an entry that fails is reported, removed and rebuilt.
std::shared_ptr<const AscendPlanner::Tilings> AscendPlanner::fromDisk(const OpSource &src, const std::string &key,
                                                                      const ResolvedSpecialization &spec) {
  std::string hash = cacheKeyHash(key);
  std::optional<DiskCache::Entry> entry = disk->load(hash, key);
  if (!entry)
    return nullptr;
  try {
    auto file = entry->files.find("tiling.json");
    if (file == entry->files.end())
      throw std::runtime_error("no tiling.json");
    nlohmann::json records = nlohmann::json::parse(file->second, nullptr, /*allow_exceptions=*/false);
    if (records.is_discarded() || !records.is_array())
      throw std::runtime_error("tiling.json: not a JSON list");
    const dsl::OpDef &op = *src.op;
    std::vector<dsl::PlannedKernel> planned =
        dsl::planKernels(op, dsl::specializationBindings(op, spec.present, spec.statics));
    auto t = std::make_shared<Tilings>();
    t->op = src.op;
    t->workspace = workspaceFromJson(entry->meta, "meta.json");
    for (size_t i = 0; i < records.size(); ++i) {
      ascend::KernelTiling k = ascend::tilingFromJson(records[i], chip_, "tiling.json[" + std::to_string(i) + "]");
      auto kernel = std::find_if(planned.begin(), planned.end(),
                                 [&](const dsl::PlannedKernel &p) { return p.name == k.kernel; });
      if (kernel == planned.end())
        throw std::runtime_error("tiling.json: kernel '" + k.kernel + "' is not a kernel of " + op.name);
      t->domains.push_back(kernel->domain);
      t->kernels.push_back(std::move(k));
    }
    if (t->kernels.empty())
      throw std::runtime_error("tiling.json: no kernels");
    for (const std::string &output : t->workspace)
      if (const dsl::TensorDecl *decl = op.findTensor(output); !decl || !decl->isOutput)
        throw std::runtime_error("meta.json: workspace names '" + output + "', not an output of " + op.name);
    return t;
  } catch (const std::exception &e) {
    disk->discard(hash, e.what());
    return nullptr;
  }
}

} // namespace moec
