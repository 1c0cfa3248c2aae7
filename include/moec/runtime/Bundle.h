//===- Bundle.h - Kernels compiled ahead of time, loaded without a compiler -*- C++ -*-===//
//
// `moec bundle` writes a directory: bundle.json (one entry per specialization: op, dtype, static values,
// optional tensors, target, the PTX file and its kernels' launch metadata), the ops' .moe sources (the
// runtime binds and checks calls from them) and the PTX. Bundle loads it with no LLVM or MLIR present,
// the way Triton's AOT launchers do, and launches through the CUDA driver.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/Kernel.h"

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace moec {

class CudaContext;

class Bundle {
public:
  struct Entry {
    std::string op;
    DType dtype = DType::F32;
    std::map<std::string, int64_t> statics; // static dims and attributes, defaults written out
    std::set<std::string> present;          // optional tensors (inputs and outputs)
    std::string target;                     // "ptx-sm_90"
    std::string codeFile;                   // the PTX, relative to the bundle
    std::vector<KernelMeta> kernels;
    std::vector<std::string> workspace;     // LoadedOp::workspace
  };

  /// Reads DIR/bundle.json and the op sources it names; throws std::runtime_error naming the file and
  /// what is wrong. Modules are loaded on `driver` when first requested.
  static std::unique_ptr<Bundle> open(const std::filesystem::path &dir, const CudaDriver &driver);
  ~Bundle();

  const std::vector<Entry> &entries() const { return list; }

  /// The kernel of the entry that matches `request` exactly (op, dtype, static values with defaults,
  /// optional tensors). Throws ArgumentError listing the bundle's specializations of the op when none
  /// does, or when the driver has no device.
  Kernel get(const std::string &op, const KernelRequest &request);

  /// The kernel of entries()[index], with no runtime attributes set (pass them at launch).
  Kernel get(size_t index, const std::map<std::string, int64_t> &runtimeAttrs = {});

  /// Writes `entries` (with their PTX in `ptx`, by entry index) and the sources in `sources` (op name ->
  /// .moe text) as a bundle directory.
  static void write(const std::filesystem::path &dir, const std::vector<Entry> &entries,
                    const std::vector<std::string> &ptx, const std::map<std::string, std::string> &sources,
                    const std::string &compiler);

private:
  Bundle(std::filesystem::path dir, const CudaDriver &driver);

  std::filesystem::path dir;
  const CudaDriver &driver;
  std::vector<Entry> list;
  std::map<std::string, std::shared_ptr<const dsl::OpDef>> ops;
  std::mutex mutex; // guards loaded and context
  std::map<size_t, std::shared_ptr<const LoadedOp>> loaded;
  std::shared_ptr<const CudaContext> context; // shared with the modules, which may outlive the bundle
};

/// The static values of `request` for `op`, with static attribute defaults filled in, and its runtime
/// attributes; attribute names may be aliases. Throws ArgumentError for an unknown attribute.
void splitRequest(const dsl::OpDef &op, const KernelRequest &request, std::map<std::string, int64_t> &statics,
                  std::map<std::string, int64_t> &runtimeAttrs);

} // namespace moec
