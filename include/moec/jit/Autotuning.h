//===- Autotuning.h - Tuned schedules: where they are kept and which a call uses -*- C++ -*-===//
//
// `moec tune` times the configs of a target's space (tune/ConfigSpace.h) and keeps the winner per
// token-count bucket in a tuning file (tune/TuningDb.h) under <cache dir>/tuning. Runtime::get() reads
// the file of the request's key and, per bucket, compiles the winner; Kernel::launch() picks by the call's
// token count (Kernel.h, TunedVariants). These are the pieces both sides share.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/compiler/Pipeline.h"
#include "moec/runtime/Kernel.h"
#include "moec/tune/TuningDb.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace moec {

/// The machine kind a tuning result holds for: "cpu-<model name>-<N>threads" on the CPU (the model from
/// /proc/cpuinfo, N the worker pool's size: $MOEC_THREADS, else the hardware threads),
/// "ptx-sm_90" on a GPU, "ascend-<chip name>" on Ascend (its plans and simulated kernels alike).
std::string tuningTargetName(const Target &target);

/// The tuning file key of a specialization: op, tuningTargetName, dtype, every static value (defaults
/// filled in), the optional tensors given.
tune::TuningKey tuningKey(const dsl::OpDef &op, const ResolvedSpecialization &spec);

/// The specialization a request makes on `target` with the compiler's schedule (statics split from the
/// runtime attributes as Runtime::get does), and its tuning key.
Specialization specializationOf(const dsl::OpDef &op, const KernelRequest &request, const Target &target);
tune::TuningKey tuningKeyOf(const std::string &op, const KernelRequest &request, const Target &target);

/// Where a call's token count is read: the first tensor (inputs, then outputs, in declaration order)
/// with a dim that is the op's `tokens` dim itself, and that dim's index. nullopt when the op declares
/// no tokens dim or no tensor has it as a plain dim.
std::optional<std::pair<std::string, size_t>> tokenDimOf(const dsl::OpDef &op);

/// The value of `op`'s tokens dim among `dims`, or nullopt (no tokens dim, or not among them).
std::optional<int64_t> tokensIn(const dsl::OpDef &op, const std::map<std::string, int64_t> &dims);

/// The winner `file` holds for `tokens` tokens (its bucket's), checked as a request for `kind`; nullopt
/// when there is none. A winner that does not parse or check is reported through `warn`, naming `path`.
std::optional<Schedule> tunedConfigOf(const tune::TuningFile &file, int64_t tokens, TargetKind kind,
                                      const std::string &path, const std::function<void(const std::string &)> &warn);

/// $MOEC_AUTOTUNE: anything but "0" (or unset) uses tuned schedules.
bool autotuneFromEnv();
/// $MOEC_PRINT_AUTOTUNING=1: say which schedule each get() chose and where it came from.
bool printAutotuningFromEnv();

} // namespace moec
