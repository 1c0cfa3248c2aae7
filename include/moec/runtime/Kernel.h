//===- Kernel.h - A compiled specialization, ready to launch ------*- C++ -*-===//
//
// LLVM-free: a deployment (or a GPU machine without LLVM) launches kernels compiled elsewhere through
// this. Every launch binds the call against the op's signature (dims from shapes, requires, ranges,
// unique indices), checks it fits the specialization, then runs each kernel in order: on the CPU thread
// pool through function pointers, or on a CUDA stream through the driver API.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/contracts/Schedule.h"
#include "moec/dsl/AST.h"
#include "moec/dsl/KernelPlan.h"
#include "moec/runtime/Binding.h"
#include "moec/runtime/CpuLauncher.h"
#include "moec/runtime/Tensor.h"

#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace moec {

class CudaDriver;
class CudaModule;
class CudaBuffer;

inline constexpr DType f16 = DType::F16, bf16 = DType::BF16, f32 = DType::F32, i32 = DType::I32, i8 = DType::I8;

/// What to specialize an op for (Runtime::get, Bundle::get).
struct KernelRequest {
  DType dtype = DType::F32;
  std::map<std::string, int64_t> dims;  // static dims (others come from the tensors at launch)
  std::map<std::string, int64_t> attrs; // static and runtime attributes, by public name or alias
  std::set<std::string> with;           // optional inputs the launches will pass
  Schedule schedule;                    // 0 fields: the compiler's choice
};

/// `name|dtype|k=v,...|k=v,...|with,...`: a request as text, which the runtime's fast paths look it up by
/// (cheaper than the full cache key, which hashes the op's source).
std::string requestText(const std::string &name, DType dtype, const std::map<std::string, int64_t> &dims,
                        const std::map<std::string, int64_t> &attrs, const std::set<std::string> &with);

/// One kernel of a specialization, as the compiler described it.
struct KernelMeta {
  std::string name;
  std::string output;
  Schedule schedule;
  bool pointPerWarp = false; // the launch covers domain points, not rows (GPU: a warp per point; Ascend point
                            // rows; CPU: point kernels, moe::runsPerPoint)
  std::vector<dsl::IndexCheck> checks; // what the kernel's status buffer reports (dsl/KernelPlan.h)
  // GPU: a block per group of rows: grid.x is all domain extents but the last two, times the runs of up to
  // kRowGroupMembers indices of the second-last one.
  bool rowGroups = false;
  // GPU: a warp per run of up to kPointRunLength points of a one-dim domain (moe-group-points): the launch
  // covers ceil(points / kPointRunLength) runs.
  bool pointRuns = false;
};

/// Runs kernel `k` of a CPU specialization: its entry point, the ABI's pointers and scalars, its rows (or
/// points), and the launch's tensors by name.
using CpuKernelLauncher =
    std::function<void(size_t k, PackedKernelFn fn, const std::vector<void *> &pointers,
                       const std::vector<int64_t> &scalars, int64_t rows, const std::map<std::string, TensorView> &tensors)>;

/// A specialization with its code. Exactly one of the CPU or CUDA parts is set.
struct LoadedOp {
  std::shared_ptr<const dsl::OpDef> op;
  DType dtype = DType::F32;
  std::map<std::string, int64_t> statics; // static dims and attributes, by public name
  std::set<std::string> present;          // optional tensors the kernels take (inputs and outputs)
  std::vector<KernelMeta> kernels;        // in launch order
  std::vector<dsl::PlannedKernel> plans;  // the same kernels' domains, from planKernels()
  /// The kernels' workspace (CompiledOp::workspace): outputs with one zeroed byte per row each. Empty:
  /// the kernels take no workspace argument.
  std::vector<std::string> workspace;

  // CPU: packed entry points, kept alive by cpuOwner (the JIT).
  std::vector<PackedKernelFn> cpu;
  std::shared_ptr<void> cpuOwner;
  /// CPU: when set, runs each kernel in place of the thread pool (the Ascend simulator launches a tiled
  /// kernel core by core: ascend/SimLauncher.h).
  CpuKernelLauncher cpuLauncher;
  // CUDA: the module and its functions.
  const CudaDriver *driver = nullptr;
  std::shared_ptr<CudaModule> cuda;
  std::vector<void *> functions; // CUfunction, per kernel

  bool onGpu() const { return cuda != nullptr; }
  /// Plans the kernels' domains from the op, by kernel name, and checks the workspace's outputs; call once
  /// the fields above are set. Throws std::runtime_error when the kernels do not fit the op.
  void plan();

  /// Calls already checked, by their shape signature (dtypes, devices, shapes, attributes): a repeat
  /// skips the signature checks and only checks index data.
  struct CheckedCall {
    BoundCall call;
    std::vector<int64_t> scalars; // the kernels' runtime dims and attributes
    std::vector<int64_t> units;   // per kernel: rows (CPU, GPU rows) or points (GPU, point per warp)
    int64_t workspaceBytes = 0;
  };
  mutable std::mutex checkedMutex;
  mutable std::unordered_map<std::string, std::shared_ptr<const CheckedCall>> checked;

  /// CUDA: the kernels' bounds-check status buffer (int64[2 * most checks of a kernel]), allocated on the
  /// first launch and shared by launches; read back only under MOEC_CHECK_INDICES=1.
  mutable std::mutex statusMutex;
  mutable std::shared_ptr<CudaBuffer> deviceStatus;
  /// CUDA: the workspace, one per stream (launches on one stream run in order; on two, at once); guarded
  /// by statusMutex like the status buffer.
  mutable std::map<void *, std::shared_ptr<CudaBuffer>> deviceWorkspaces;
};

/// Specializations of one request tuned for token-count buckets (`moec tune`): a call whose token count
/// T falls in a bucket b (b a power of two, T in (b/2, b]; bucket 1 also takes T = 0) runs that bucket's
/// specialization; any other call runs the heuristic's.
struct TunedVariants {
  std::string tensor; // the tensor whose dim `axis` is the op's token count (`dim ...: runtime tokens`)
  size_t axis = 0;
  std::vector<std::pair<int64_t, std::shared_ptr<const LoadedOp>>> byBucket; // by bucket, ascending

  /// The specialization for `tokens`, or nullptr when no bucket holds it.
  const LoadedOp *forTokens(int64_t tokens) const {
    for (const auto &[bucket, loaded] : byBucket)
      if (tokens <= bucket && (tokens > bucket / 2 || bucket == 1))
        return loaded.get();
    return nullptr;
  }
};

/// A handle to a loaded specialization plus the runtime attribute values it was requested with.
/// Copying is cheap; launch() may be called from several threads at once.
class Kernel {
public:
  Kernel() = default;
  Kernel(std::shared_ptr<const LoadedOp> loaded, std::map<std::string, int64_t> attrs,
         std::shared_ptr<const TunedVariants> tuned = nullptr)
      : loaded(std::move(loaded)), attrs(std::move(attrs)), tuned(std::move(tuned)) {}

  explicit operator bool() const { return loaded != nullptr; }
  /// The heuristic's specialization (calls in a tuned bucket run tunedVariants()'s).
  const LoadedOp &specialization() const { return *loaded; }
  const TunedVariants *tunedVariants() const { return tuned.get(); }
  /// The specialization a call with these tensors runs.
  const LoadedOp &specializationFor(const std::map<std::string, TensorView> &tensors) const;

  /// Tensors in declaration order: `inputs` are the op's inputs (an absent optional input is an empty
  /// view: data == nullptr and no shape), `outputs` its outputs (likewise for an optional output the call
  /// does not produce). Asynchronous on `stream` (a CUstream) for CUDA kernels; CPU kernels run on the
  /// thread pool and return when done. `attrs` overrides runtime attributes for this launch.
  void launch(const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs,
              void *stream = nullptr, const std::map<std::string, int64_t> &attrs = {}) const;

  /// The same with tensors by name.
  void launch(const std::map<std::string, TensorView> &tensors, void *stream = nullptr,
              const std::map<std::string, int64_t> &attrs = {}) const;

  /// Binds and checks a call without launching it: what launch() does first. Throws ArgumentError.
  std::shared_ptr<const LoadedOp::CheckedCall> check(const std::map<std::string, TensorView> &inputs,
                                                     const std::map<std::string, TensorView> &outputs,
                                                     const std::map<std::string, int64_t> &attrs = {}) const;

private:
  const LoadedOp &pick(const std::map<std::string, TensorView> &tensors,
                       const std::map<std::string, TensorView> *more) const;
  std::shared_ptr<const LoadedOp::CheckedCall> checkOn(const LoadedOp &l,
                                                       const std::map<std::string, TensorView> &inputs,
                                                       const std::map<std::string, TensorView> &outputs,
                                                       const std::map<std::string, int64_t> &attrs) const;

  std::shared_ptr<const LoadedOp> loaded;
  std::map<std::string, int64_t> attrs;
  std::shared_ptr<const TunedVariants> tuned;
};

} // namespace moec
