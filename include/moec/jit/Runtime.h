//===- Runtime.h - moec's C++ API: compile on first use, cache, launch -*- C++ -*-===//
//
//   moec::Runtime rt;                       // CUDA if a device is found, else the CPU
//   auto k = rt.get("moe_init_routing_v2_grad",
//                   {.dtype = moec::bf16, .dims = {{"H", 7168}}, .attrs = {{"top_k", 8}}});
//   k.launch({grad_expanded_x, expanded_row_idx}, {grad_x}, stream);
//
// get() looks the specialization up in memory, then on disk (a new process: no MLIR pipeline runs), and
// compiles it only when neither has it; two threads asking for the same new specialization compile it
// once. Runtime dims (token counts) are not part of the key: a new batch size reuses the kernel.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/compiler/Pipeline.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Kernel.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace moec {

class CudaContext;
class DiskCache;
namespace tune {
class TuningDb;
}

class Runtime {
public:
  struct Options {
    std::optional<Target> target;                // default: CUDA (the device's arch) if found, else CPU
    std::optional<std::filesystem::path> cacheDir; // default: $MOEC_CACHE_DIR, $XDG_CACHE_HOME/moec, ~/.cache/moec
    std::optional<bool> alwaysCompile;           // default: $MOEC_ALWAYS_COMPILE=1
    std::optional<std::filesystem::path> dumpDir; // default: $MOEC_DUMP_DIR: every stage of every compile
    const CudaDriver *driver = nullptr;          // default: the system's libcuda.so.1
    std::function<void(const std::string &)> warn; // default: one line on stderr
    std::optional<bool> autotune;         // default: $MOEC_AUTOTUNE != 0: use tuned schedules (moec tune)
    std::optional<bool> printAutotuning;  // default: $MOEC_PRINT_AUTOTUNING=1: say what get() chose, and why
    std::function<void(const std::string &)> inform; // default: one line on stderr ("moec: autotuning: ...")
  };

  Runtime();
  explicit Runtime(Options options);
  ~Runtime();

  /// The kernel for `op` (a built-in op name or a .moe path) specialized per `request`. Throws
  /// CompileError or dsl::DslError; what a launch then gets wrong throws ArgumentError. When the request
  /// leaves the schedule to the compiler and a tuning file holds winners for it, each tuned bucket's
  /// winner is compiled too, and a launch whose token count falls in a tuned bucket runs it.
  Kernel get(const std::string &op, const KernelRequest &request);

  const Target &target() const { return targetSpec; }

  struct Stats {
    uint64_t memoryHits = 0, diskHits = 0, compiles = 0;
  };
  Stats stats() const { return {memoryHits.load(), diskHits.load(), compiles.load()}; }

  /// The text the disk cache hashes for a specialization: compiler build, LLVM version, op source hash,
  /// dtype, static values, optional tensors, target and its toolchain, schedule. Exposed for tests.
  std::string cacheKey(const dsl::OpDef &op, const std::string &source, const ResolvedSpecialization &spec) const;

private:
  using OpSource = OpWithSource;
  const OpSource &source(const std::string &name);
  Kernel getSlow(const std::string &name, const KernelRequest &request);
  std::shared_ptr<const LoadedOp> loadOnce(const OpSource &source, const ResolvedSpecialization &spec);
  std::shared_ptr<const TunedVariants> tunedVariants(const OpSource &source, const ResolvedSpecialization &spec);
  std::shared_ptr<const LoadedOp> load(const OpSource &source, const ResolvedSpecialization &spec, const std::string &key);
  std::shared_ptr<const LoadedOp> fromDisk(const OpSource &source, const ResolvedSpecialization &spec, const std::string &key);
  std::shared_ptr<const LoadedOp> compileAndStore(const OpSource &source, const ResolvedSpecialization &spec,
                                                  const std::string &key);

  Options options;
  Target targetSpec;
  std::unique_ptr<DiskCache> disk;
  std::unique_ptr<tune::TuningDb> tuning;
  std::shared_ptr<const CudaContext> cudaContext; // the primary context; each module keeps it alive too

  std::mutex mutex; // guards the maps below
  std::unordered_map<std::string, OpSource> sources;
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<const LoadedOp>>> loaded; // by cache key
  std::unordered_map<std::string, Kernel> requests; // by request text: the fast path of get()
  std::atomic<uint64_t> memoryHits{0}, diskHits{0}, compiles{0};
};

/// What the compiler said of each kernel, as the runtime keeps it.
std::vector<KernelMeta> kernelMetas(const CompiledOp &compiled);

/// A specialization ready to launch, from its kernels, their workspace (CompiledOp::workspace) and code:
/// a linked host object (`cpu`) for the CPU, or PTX loaded on `driver` in `context`.
std::shared_ptr<LoadedOp> makeLoadedOp(std::shared_ptr<const dsl::OpDef> op, const ResolvedSpecialization &spec,
                                       std::vector<KernelMeta> kernels, std::vector<std::string> workspace,
                                       const std::string &ptx,
                                       std::unique_ptr<CpuExecutable> cpu, const CudaDriver *driver,
                                       std::shared_ptr<const CudaContext> context = nullptr);

} // namespace moec
