//===- Pipeline.h - DSL op to PTX or host code -------------------*- C++ -*-===//
#pragma once

#include "moec/compiler/Targets/Targets.h"
#include "moec/contracts/Schedule.h"
#include "moec/contracts/ascend/Tiling.h"
#include "moec/dsl/AST.h"
#include "moec/dsl/KernelPlan.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace moec {

/// The stages `moec emit --emit` and `--dump-dir` can show, in pipeline order. Gen is genMoe's IR, before
/// any pass: what `moec-opt --moe-pipeline` replays.
enum class Stage { Ast, Gen, Moe, Loops, LLVM, PTX, Asm };
const char *stageName(Stage s); // "ast", "gen", "moe", "loops", "llvm", "ptx", "asm"
std::optional<Stage> parseStage(const std::string &name);

struct Target {
  TargetKind kind = TargetKind::CPU;
  std::string arch = "host"; // "sm_90" for GPU targets, the chip's name for Ascend
  std::shared_ptr<const ascend::Chip> chip; // Ascend only
  /// Ascend: the tiled kernels are also compiled for the CPU, to run on the UB simulator
  /// (runtime/ascend/SimLauncher.h); without it, compiling stops at the plans.
  bool simulated = false;

  static Target cpu() { return {TargetKind::CPU, "host", nullptr}; }
  static Target ptx(const std::string &arch) { return {TargetKind::GPU, arch, nullptr}; }
  static Target ascend(const ascend::Chip &chip) {
    return {TargetKind::Ascend, chip.name, std::make_shared<const ascend::Chip>(chip)};
  }
  static Target ascendSimulator(const ascend::Chip &chip) {
    return {TargetKind::Ascend, chip.name, std::make_shared<const ascend::Chip>(chip), true};
  }
  std::string str() const {
    return kind == TargetKind::CPU   ? "cpu"
           : kind == TargetKind::GPU ? "ptx-" + arch
                                     : (simulated ? "ascend-sim-" : "ascend-") + arch;
  }
};

/// What a kernel is specialized for: everything that changes its code, and nothing else (runtime dims
/// and attributes are arguments). The runtime's cache key is built from this plus the source hash.
struct Specialization {
  dsl::DType dtype = dsl::DType::F32;
  std::map<std::string, int64_t> statics; // static dims by name, static attrs by public name
  Target target;
  Schedule schedule;            // requested; 0 fields are the compiler's choice
  std::set<std::string> present; // the optional tensors given
};

struct KernelInfo {
  std::string name;   // entry symbol (PTX .entry; CPU: name + "_packed")
  std::string output; // the tensor the kernel writes
  Schedule schedule;  // as chosen
  /// The extents of the kernel's domain, as DSL expressions over dims, attributes and top-level lets
  /// (pointing into the OpDef it was compiled from). Rows = all but the last, multiplied.
  std::vector<const dsl::Expr *> domain;
  /// GPU launch: grid.x = ceil_div(rows, rowsPerBlock), block = (threads, rowsPerBlock, 1); with
  /// pointPerWarp the grid covers every domain point (rows times the last extent) instead of rows. Ascend
  /// (simulated): set for point rows, whose cores split the domain's points. CPU: set for point kernels
  /// (moe::runsPerPoint), whose row range is of points.
  bool pointPerWarp = false;
  /// The bounds checks the kernel reports in its status buffer (see genMoe).
  std::vector<dsl::IndexCheck> checks;
  /// GPU: a block per group of rows that differ only in their last row index (moe-group-rows), its
  /// rowsPerBlock warps splitting the row; grid.x = the groups: the product of the domain's extents but the
  /// last two.
  bool rowGroups = false;
  /// GPU: a warp per run of up to kPointRunLength points of a one-dim domain (moe-group-points); the grid
  /// covers ceil(points / kPointRunLength) runs.
  bool pointRuns = false;
};

/// Milliseconds spent in each part of compile().
struct StageTimes {
  double frontend = 0; // AST -> moe dialect
  double passes = 0;   // moe passes, loop lowering, LLVM dialect conversion
  double llvm = 0;     // translation to LLVM IR and LLVM's optimizer
  double codegen = 0;  // NVPTX emission, or JIT compilation
  /// LLVM's optimizer and code generator did not run: the code is an earlier compile's in this process, of
  /// the same LLVM IR (CompileOptions::reuseGeneratedCode).
  bool reusedCode = false;
  double total() const { return frontend + passes + llvm + codegen; }
};

struct CompiledOp {
  std::vector<KernelInfo> kernels; // in the order they must run
  /// The kernels' scratch buffer (see moe-fill-uncovered-rows): empty when they take none; else they take
  /// a `workspace` pointer after the status buffer, to zeroed memory holding, for each output named here
  /// in order, one byte per row (all dims but the last) at a 64-byte aligned offset.
  std::vector<std::string> workspace;
  std::map<Stage, std::string> dumps; // the text of each stage asked for
  std::string ptx;                    // GPU targets
  std::vector<ascend::KernelTiling> ascend; // Ascend target: each kernel's tiling, in kernel order
  std::string cpuObject;              // CPU target: the host object file...
  std::unique_ptr<CpuExecutable> cpu; // ...linked into this process
  StageTimes times;
};

struct CompileOptions {
  std::set<Stage> dump; // stages whose text to keep in CompiledOp::dumps
  /// Stop once the last stage in `dump` is printed (`moec emit --emit loops` needs no code): the result then
  /// has no PTX or CPU code, and its kernels, workspace and tilings only as far as the stages before made them.
  bool stopAfterDumps = false;
  /// Take the PTX or host object from an earlier compile in this process whose LLVM IR was the same
  /// (Targets/GeneratedCode.h), instead of optimizing and generating it again. Off where the compile's own
  /// time is measured.
  bool reuseGeneratedCode = true;
};

/// A specialization that does not fit the op (unknown or missing static values, a static require that
/// fails, an unsupported dtype or arch), or IR the pipeline rejects.
class CompileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A Specialization checked against its op and completed: what a kernel is compiled for, keyed, loaded,
/// tuned and bundled by. resolve() makes it once from a request; everything after reads it, none resolves
/// the request again.
struct ResolvedSpecialization {
  dsl::DType dtype = dsl::DType::F32;
  /// Every static dim and attribute by public name: the request's, an alias resolved to its name, and each
  /// attribute's default where the request leaves it out.
  std::map<std::string, int64_t> statics;
  std::set<std::string> inputs;  // the optional inputs given (the request's `present`)
  std::set<std::string> present; // those, and the optional outputs whose `when` holds for them and the statics
  Target target;
  Schedule schedule; // as requested (0 fields: the compiler's choice), checked for the target

  /// The same specialization with another schedule (a tuned one), checked like the request's.
  ResolvedSpecialization withSchedule(const Schedule &s) const;
};

/// Checks `spec` against `op` and completes it: no unknown or runtime name among the statics, a value for
/// every static dim and attribute (defaults filled in), an allowed dtype, the requires that depend only on
/// static values, only optional tensors named present, a known PTX arch, a schedule the target can run.
/// Throws CompileError.
ResolvedSpecialization resolve(const dsl::OpDef &op, const Specialization &spec);

/// Compiles every kernel of `op` for `spec`. Throws CompileError.
CompiledOp compile(const dsl::OpDef &op, const ResolvedSpecialization &spec, const CompileOptions &options = {});
/// compile(op, resolve(op, spec), options).
CompiledOp compile(const dsl::OpDef &op, const Specialization &spec, const CompileOptions &options = {});

} // namespace moec
