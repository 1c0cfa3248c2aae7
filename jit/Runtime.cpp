//===- Runtime.cpp - Compile on first use, cache in memory and on disk ----===//
//
// get():
//   1. parse the op once per runtime (built-in name or .moe path);
//   2. build the specialization and its cache key (what changes the code, nothing else);
//   3. memory: a map from key to a shared future, so concurrent first requests compile once;
//   4. disk: an entry with the PTX or host object file plus metadata loads without running MLIR;
//   5. otherwise compile, store every stage on disk, and keep the result in memory.
//===----------------------------------------------------------------------===//
#include "moec/jit/Autotuning.h"
#include "moec/jit/Runtime.h"
#include "moec/runtime/ascend/SimLauncher.h"
#include "moec/tune/ConfigSpace.h"

#include "moec/BuildId.h" // generated: MOEC_BUILD_ID, a hash of the compiler sources

#include "moec/compiler/Pipeline.h"
#include "moec/compiler/PipelineTable.h"
#include "moec/contracts/Files.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Bundle.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/DiskCache.h"
#include "moec/runtime/KernelJson.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iostream>

namespace moec {

namespace {

bool envFlag(const char *name) {
  const char *v = std::getenv(name);
  return v && std::string(v) != "" && std::string(v) != "0";
}

std::optional<std::filesystem::path> envPath(const char *name) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return std::nullopt;
  return std::filesystem::path(v);
}

std::string joined(const std::map<std::string, int64_t> &values) {
  std::string s;
  for (const auto &[k, v] : values)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

std::string joined(const std::set<std::string> &values) {
  std::string s;
  for (const std::string &v : values)
    s += (s.empty() ? "" : ",") + v;
  return s;
}

const char *codeFile(const Target &t) { return t.kind == TargetKind::GPU ? "kernel.ptx" : "kernel.o"; }

} // namespace

Runtime::Runtime() : Runtime(Options{}) {}

Runtime::Runtime(Options o) : options(std::move(o)) {
  if (!options.warn)
    options.warn = [](const std::string &message) { std::cerr << "moec: warning: " << message << "\n"; };
  if (!options.alwaysCompile)
    options.alwaysCompile = envFlag("MOEC_ALWAYS_COMPILE");
  if (!options.dumpDir)
    options.dumpDir = envPath("MOEC_DUMP_DIR");
  if (!options.driver)
    options.driver = &CudaDriver::instance();
  if (!options.autotune)
    options.autotune = autotuneFromEnv();
  if (!options.printAutotuning)
    options.printAutotuning = printAutotuningFromEnv();
  if (!options.inform)
    options.inform = [](const std::string &message) { std::cerr << "moec: " << message << "\n"; };

  if (options.target) {
    targetSpec = *options.target;
  } else if (options.driver->available()) {
    targetSpec = Target::ptx(options.driver->archName(0));
  } else {
    targetSpec = Target::cpu();
  }
  if (targetSpec.kind == TargetKind::GPU) {
    if (!options.driver->available())
      throw CompileError("target " + targetSpec.str() + " needs a GPU: " + options.driver->unavailableReason());
    cudaContext = std::make_shared<const CudaContext>(*options.driver, kCudaDevice);
  }

  disk = std::make_unique<DiskCache>(options.cacheDir.value_or(defaultCacheDir()));
  disk->setWarningHandler([warn = options.warn](const std::string &line) {
    warn(line.rfind("moec: warning: ", 0) == 0 ? line.substr(15) : line);
  });
  if (!disk->enabled())
    options.warn(disk->disabledReason() + "; caching kernels in memory only");
  tuning = std::make_unique<tune::TuningDb>(disk->dir() / "tuning", options.warn);
}

Runtime::~Runtime() = default;

const Runtime::OpSource &Runtime::source(const std::string &name) {
  std::lock_guard<std::mutex> lock(mutex); // get() runs on any thread; entries are never erased
  auto it = sources.find(name);
  if (it != sources.end())
    return it->second;
  return sources.emplace(name, loadOpWithSource(name)).first->second;
}

std::string Runtime::cacheKey(const dsl::OpDef &op, const std::string &source, const ResolvedSpecialization &spec) const {
  std::string toolchain = spec.target.kind == TargetKind::GPU ? "nvptx " + spec.target.arch : hostToolchain();
  return std::string("moec kernel cache 2\ncompiler " MOEC_BUILD_ID "\nllvm ") + llvmVersion() + "\nop " +
         op.name + " " + contentHash(source) + "\ndtype " + dsl::dtypeName(spec.dtype) + "\nstatics " +
         joined(spec.statics) + "\npresent " + joined(spec.inputs) + "\ntarget " + spec.target.str() +
         "\ntoolchain " + toolchain + "\nschedule " + spec.schedule.str() + "\n" +
         (spec.target.chip ? "chip " + ascend::chipKeyText(*spec.target.chip) + "\n" : std::string());
}

/// The request as text: what the fast path of get() looks up before building the full cache key.
static std::string requestKey(const std::string &name, const KernelRequest &r) {
  return requestText(name, r.dtype, r.dims, r.attrs, r.with) + "|" + r.schedule.str();
}

Kernel Runtime::get(const std::string &name, const KernelRequest &request) {
  std::string fast = requestKey(name, request);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = requests.find(fast);
    if (it != requests.end()) {
      ++memoryHits;
      return it->second;
    }
  }
  Kernel kernel = getSlow(name, request);
  std::lock_guard<std::mutex> lock(mutex);
  requests.emplace(std::move(fast), kernel);
  return kernel;
}

Kernel Runtime::getSlow(const std::string &name, const KernelRequest &request) {
  const OpSource &src = source(name);
  const dsl::OpDef &op = *src.op;
  Specialization requested{request.dtype, {}, targetSpec, request.schedule, request.with};
  std::map<std::string, int64_t> runtimeAttrs;
  splitRequest(op, request, requested.statics, runtimeAttrs);
  ResolvedSpecialization spec = resolve(op, requested);
  std::shared_ptr<const LoadedOp> heuristic = loadOnce(src, spec);
  return Kernel(std::move(heuristic), std::move(runtimeAttrs), tunedVariants(src, spec));
}

std::shared_ptr<const LoadedOp> Runtime::loadOnce(const OpSource &src, const ResolvedSpecialization &requested) {
  // An optimization that no pass for this target reads cannot change its code: turning it off or on names
  // the same kernel, compiled and cached once.
  ResolvedSpecialization spec = requested;
  spec.schedule.disabled &= optimizationsFor(spec.target.kind);
  spec.schedule.enabled &= optimizationsFor(spec.target.kind);
  std::string key = cacheKey(*src.op, src.source, spec);
  std::shared_future<std::shared_ptr<const LoadedOp>> future;
  std::promise<std::shared_ptr<const LoadedOp>> promise;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = loaded.find(key);
    if (it != loaded.end()) {
      future = it->second;
      ++memoryHits;
    } else {
      future = promise.get_future().share();
      loaded.emplace(key, future);
      owner = true;
    }
  }
  if (owner) {
    try {
      promise.set_value(load(src, spec, key));
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(mutex);
      loaded.erase(key); // a later request tries again
    }
  }
  return future.get();
}

std::shared_ptr<const TunedVariants> Runtime::tunedVariants(const OpSource &src, const ResolvedSpecialization &spec) {
  const dsl::OpDef &op = *src.op;
  bool print = *options.printAutotuning;
  std::string what = op.name + " " + dsl::dtypeName(spec.dtype) + " on " + tuningTargetName(spec.target);
  auto say = [&](const std::string &line) {
    if (print)
      options.inform("autotuning: " + what + ": " + line);
  };
  if (spec.schedule != Schedule{}) {
    say("the requested schedule " + tune::configText(spec.schedule));
    return nullptr;
  }
  if (!*options.autotune) {
    say("MOEC_AUTOTUNE=0: the heuristic's schedule");
    return nullptr;
  }
  tune::TuningKey key = tuningKey(op, spec);
  std::optional<tune::TuningFile> file = tuning->load(key);
  std::filesystem::path path = tuning->dir() / key.fileName();
  if (!file || file->buckets.empty()) {
    say("no tuning file " + path.string() + ": the heuristic's schedule");
    return nullptr;
  }
  std::optional<std::pair<std::string, size_t>> tokens = tokenDimOf(op);
  if (!tokens) {
    options.warn(path.string() + ": " + op.name + " declares no tokens dim that a tensor carries; not using it");
    return nullptr;
  }
  auto variants = std::make_shared<TunedVariants>();
  variants->tensor = tokens->first;
  variants->axis = tokens->second;
  for (const auto &[bucket, result] : file->buckets) {
    std::optional<Schedule> parsed = tunedConfigOf(*file, bucket, spec.target.kind, path.string(), options.warn);
    if (!parsed)
      continue;
    Schedule config = *parsed;
    std::string range = tokens->first + "[" + std::to_string(tokens->second) + "] in (" + std::to_string(bucket / 2) +
                        ", " + std::to_string(bucket) + "]: ";
    if (config == Schedule{}) { // the sweep found nothing faster than the heuristic
      say(range + "the heuristic's schedule (tuned: " + path.string() + ")");
      continue;
    }
    variants->byBucket.emplace_back(bucket, loadOnce(src, spec.withSchedule(config)));
    say(range + result.best + " (tuned: " + path.string() + ", " + fmt::format("{:.1f}", result.us) + " us)");
  }
  // Said whatever the buckets hold (a sweep may find the heuristic best everywhere): the output's shape
  // does not depend on timings.
  say("other token counts: the heuristic's schedule");
  if (variants->byBucket.empty())
    return nullptr;
  return variants;
}

std::shared_ptr<const LoadedOp> Runtime::load(const OpSource &src, const ResolvedSpecialization &spec,
                                              const std::string &key) {
  if (!*options.alwaysCompile && disk->enabled())
    if (auto hit = fromDisk(src, spec, key)) {
      ++diskHits;
      return hit;
    }
  ++compiles;
  return compileAndStore(src, spec, key);
}

std::shared_ptr<const LoadedOp> Runtime::fromDisk(const OpSource &src, const ResolvedSpecialization &spec,
                                                  const std::string &key) {
  std::string hash = cacheKeyHash(key);
  std::optional<DiskCache::Entry> entry = disk->load(hash, key);
  if (!entry)
    return nullptr;
  // DiskCache checked the files against meta.json; whatever fails from here on (a kernel record, the
  // object or PTX refusing to load, a kernel missing from it) also means a bad entry: it is reported,
  // removed and recompiled, never an error on every later run.
  try {
    auto code = entry->files.find(codeFile(spec.target));
    if (code == entry->files.end())
      throw std::runtime_error(std::string("no ") + codeFile(spec.target));
    const nlohmann::json &records = entry->meta.at("kernels");
    if (!records.is_array() || records.empty())
      throw std::runtime_error("meta.json: 'kernels' must be a non-empty list");
    std::vector<KernelMeta> kernels;
    for (size_t i = 0; i < records.size(); ++i)
      kernels.push_back(
          kernelMetaFromJson(records[i], spec.target.kind, "meta.json: kernels[" + std::to_string(i) + "]"));
    std::vector<std::string> workspace = workspaceFromJson(entry->meta, "meta.json");
    std::unique_ptr<CpuExecutable> cpu;
    if (spec.target.kind == TargetKind::CPU || spec.target.simulated) // host code (the CPU, or the UB simulator)
      cpu = loadHostObject(code->second);
    return makeLoadedOp(src.op, spec, std::move(kernels), std::move(workspace), code->second, std::move(cpu), options.driver,
                        cudaContext);
  } catch (const std::exception &e) {
    disk->discard(hash, e.what());
    return nullptr;
  }
}

std::shared_ptr<const LoadedOp> Runtime::compileAndStore(const OpSource &src, const ResolvedSpecialization &spec,
                                                         const std::string &key) {
  // Host assembly is a second run of the code generator (as long as the object's): only for a dump dir.
  bool hostAsm = spec.target.kind == TargetKind::CPU && options.dumpDir;
  CompileOptions stages{{Stage::Moe, Stage::Loops, Stage::LLVM}};
  if (hostAsm)
    stages.dump.insert(Stage::Asm);
  CompiledOp compiled = compile(*src.op, spec, stages);
  std::vector<KernelMeta> kernels = kernelMetas(compiled);

  DiskCache::Entry entry;
  entry.keyText = key;
  entry.files = {{"op.moe", src.source},
                 {"moe.mlir", compiled.dumps[Stage::Moe]},
                 {"loops.mlir", compiled.dumps[Stage::Loops]},
                 {"kernel.ll", compiled.dumps[Stage::LLVM]}};
  std::string artifact = spec.target.kind == TargetKind::GPU ? compiled.ptx : compiled.cpuObject;
  entry.files[codeFile(spec.target)] = artifact;
  entry.meta["kernels"] = nlohmann::json::array();
  for (const KernelMeta &k : kernels)
    entry.meta["kernels"].push_back(kernelMetaToJson(k));
  entry.meta["workspace"] = compiled.workspace;
  std::string hash = cacheKeyHash(key);
  if (disk->enabled())
    disk->store(hash, entry);
  if (options.dumpDir) {
    std::map<std::string, std::string> files = entry.files;
    files.erase("kernel.o");
    if (hostAsm)
      files["kernel.s"] = compiled.dumps[Stage::Asm];
    std::filesystem::create_directories(*options.dumpDir);
    for (const auto &[file, text] : files)
      writeFileReplacing((*options.dumpDir / (src.op->name + "-" + hash.substr(0, 8) + "." + file)).string(), {text});
  }
  return makeLoadedOp(src.op, spec, std::move(kernels), compiled.workspace, artifact, std::move(compiled.cpu), options.driver, cudaContext);
}

std::vector<KernelMeta> kernelMetas(const CompiledOp &compiled) {
  std::vector<KernelMeta> kernels;
  for (const KernelInfo &k : compiled.kernels)
    kernels.push_back({k.name, k.output, k.schedule, k.pointPerWarp, k.checks, k.rowGroups, k.pointRuns});
  return kernels;
}

std::shared_ptr<LoadedOp> makeLoadedOp(std::shared_ptr<const dsl::OpDef> op, const ResolvedSpecialization &spec,
                                       std::vector<KernelMeta> kernels, std::vector<std::string> workspace,
                                       const std::string &ptx,
                                       std::unique_ptr<CpuExecutable> cpu, const CudaDriver *driver,
                                       std::shared_ptr<const CudaContext> context) {
  auto l = std::make_shared<LoadedOp>();
  l->op = std::move(op);
  const dsl::OpDef &def = *l->op;
  l->dtype = spec.dtype;
  l->statics = spec.statics;
  l->present = spec.present;
  l->kernels = std::move(kernels);
  l->workspace = std::move(workspace);
  bool onHost = spec.target.kind == TargetKind::CPU || (spec.target.kind == TargetKind::Ascend && spec.target.simulated);
  if (spec.target.kind == TargetKind::Ascend && !onHost)
    throw CompileError(def.name + ": Ascend kernels are not launched here: the target gives plans (use the simulator "
                                  "target to run the tiled kernels)");
  if (onHost) {
    if (!cpu)
      throw CompileError(def.name + ": no host code to load");
    for (const KernelMeta &k : l->kernels) {
      PackedKernelFn fn = cpu->lookup(k.name);
      if (!fn)
        throw CompileError(def.name + ": kernel '" + k.name + "' is missing from its object file");
      l->cpu.push_back(fn);
    }
    l->cpuOwner = std::shared_ptr<CpuExecutable>(std::move(cpu));
    if (spec.target.simulated) { // tiled Ascend kernels run core by core on the UB simulator, never on the pool
      std::vector<std::string> names;
      for (const KernelMeta &k : l->kernels)
        names.push_back(k.name);
      l->cpuLauncher = ascend::simulatorLauncher(*spec.target.chip, std::move(names));
    }
  } else {
    l->driver = driver;
    l->cuda = std::make_shared<CudaModule>(*driver, ptx, std::move(context));
    for (const KernelMeta &k : l->kernels)
      l->functions.push_back(l->cuda->function(k.name));
  }
  l->plan();
  return l;
}

} // namespace moec
