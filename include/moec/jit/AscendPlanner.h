//===- AscendPlanner.h - moec's C++ API for Ascend tiling plans --*- C++ -*-===//
//
//   moec::AscendPlanner planner(moec::ascend::builtinChip("910b"));
//   auto plan = planner.plan("moe_init_routing_v2_grad",
//                            {.dtype = moec::bf16, .dims = {{"N", 4096}, {"H", 7168}}, .attrs = {{"top_k", 8}}});
//   plan->kernels[0].blockDim;  // 40: the launch's block dim; plan->tilingKey, plan->workspaceBytes ...
//
// A plan depends on the call's shapes, as CANN's tiling does. The tiled kernels depend only on the static
// ones: plan() compiles each specialization for the chip once (moe-plan-ascend) and keeps its tilings in
// memory and in the disk cache (keyed by the op's source, the static values and every figure of the chip),
// then splits each call's rows over the cores, which costs microseconds; the most recent plans are kept.
// Where `moec tune --target ascend` left a tuning file for the specialization, the call's token bucket
// picks the UB plan's knobs from it (Plan::config, Plan::tunedFrom); MOEC_AUTOTUNE=0 turns that off.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Kernel.h" // moec::bf16 ...
#include "moec/runtime/ascend/Plan.h"
#include "moec/tune/TuningDb.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace moec {

class DiskCache;
struct ResolvedSpecialization; // moec/compiler/Pipeline.h

/// One call to plan: every dim its kernels use (static and runtime), the attributes, the optional inputs.
struct PlanCall {
  dsl::DType dtype = dsl::DType::F32;
  std::map<std::string, int64_t> dims;
  std::map<std::string, int64_t> attrs;
  std::set<std::string> with;
  /// Per kernel name, how many of its guarded rows do their work, when the caller knows (PlanRequest).
  std::map<std::string, int64_t> liveRows;
  /// The UB plan's knobs (Schedule::buffers, chunk, rowsPerBlock: the most rows per pass). Schedule{}:
  /// the tuned config of the call's token bucket when `moec tune --target ascend` left one, else the
  /// compiler's choice.
  Schedule schedule;
};

class AscendPlanner {
public:
  struct Options {
    std::optional<std::filesystem::path> cacheDir; // default: the kernel cache's ($MOEC_CACHE_DIR, ...)
    size_t maxPlans = 256;                         // recent plans kept in memory
    std::function<void(const std::string &)> warn; // default: one line on stderr
    std::optional<bool> autotune;                  // use tuning files (default: $MOEC_AUTOTUNE, else on)
  };

  explicit AscendPlanner(ascend::Chip chip);
  AscendPlanner(ascend::Chip chip, Options options);
  ~AscendPlanner();

  /// The plan of `op` (a built-in op name or a .moe path) for `call`. Throws CompileError or
  /// dsl::DslError for a specialization the op does not allow, std::invalid_argument for a missing dim.
  std::shared_ptr<const ascend::Plan> plan(const std::string &op, const PlanCall &call);

  const ascend::Chip &chip() const { return chip_; }

  struct Stats {
    uint64_t planHits = 0, tilingHits = 0, diskHits = 0, compiles = 0;
  };
  Stats stats() const { return {planHits.load(), tilingHits.load(), diskHits.load(), compiles.load()}; }

  /// The text the disk cache hashes for a specialization's tilings: the compiler build, the op's source
  /// hash, dtype, static values, optional inputs, the schedule and the chip's every field. Exposed for tests.
  std::string cacheKey(const dsl::OpDef &op, const std::string &source, const ResolvedSpecialization &spec) const;

private:
  using OpSource = OpWithSource;
  /// What a specialization's plans are made from.
  struct Tilings {
    std::shared_ptr<const dsl::OpDef> op;
    std::vector<ascend::KernelTiling> kernels;
    std::vector<std::vector<const dsl::Expr *>> domains;
    std::vector<std::string> workspace;
  };
  const OpSource &source(const std::string &name);
  std::shared_ptr<const Tilings> tilings(const OpSource &src, const std::string &key,
                                         const ResolvedSpecialization &spec);
  /// The tuned config for `call`'s token count and the file it came from, or nothing.
  std::optional<std::pair<Schedule, std::string>> tuned(const dsl::OpDef &op, const PlanCall &call,
                                                        const ResolvedSpecialization &spec);
  std::shared_ptr<const Tilings> fromDisk(const OpSource &src, const std::string &key,
                                          const ResolvedSpecialization &spec);

  ascend::Chip chip_;
  Options options;
  std::unique_ptr<DiskCache> disk;
  std::unique_ptr<tune::TuningDb> tuning;
  std::mutex mutex; // guards everything below; a compile holds it (plans are made rarely)
  std::unordered_map<std::string, OpSource> sources;
  std::unordered_map<std::string, std::shared_ptr<const Tilings>> tilingsByStatics; // by request text
  std::unordered_map<std::string, std::optional<tune::TuningFile>> tuningFiles;     // by file name, read once
  std::list<std::pair<std::string, std::shared_ptr<const ascend::Plan>>> recent; // most recent first
  std::unordered_map<std::string, decltype(recent)::iterator> plansByCall;
  std::atomic<uint64_t> planHits{0}, tilingHits{0}, diskHits{0}, compiles{0};
};

} // namespace moec
