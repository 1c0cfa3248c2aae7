//===- Autotuning.cpp - Tuning keys and the token dim ----------------------===//
#include "moec/jit/Autotuning.h"

#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Bundle.h"
#include "moec/runtime/ThreadPool.h"
#include "moec/tune/ConfigSpace.h"

#include <cctype>
#include <cstdlib>
#include <fstream>

namespace moec {

namespace {

std::string cpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      std::string name = colon == std::string::npos ? "" : line.substr(colon + 1);
      std::string clean;
      for (char c : name) // one word: spaces and punctuation become '_', runs of them one
        if (std::isalnum(static_cast<unsigned char>(c)))
          clean += c;
        else if (!clean.empty() && clean.back() != '_')
          clean += '_';
      while (!clean.empty() && clean.back() == '_')
        clean.pop_back();
      if (!clean.empty())
        return clean;
    }
  return "unknown";
}

} // namespace

std::string tuningTargetName(const Target &target) {
  if (target.kind == TargetKind::Ascend) // the plans and the simulated kernels share their tuning
    return "ascend-" + target.arch;
  if (target.kind != TargetKind::CPU)
    return target.str();
  // The pool's size is part of the machine: how rows are best split depends on the workers there are.
  static const std::string model = cpuModelName();
  return "cpu-" + model + "-" + std::to_string(ThreadPool::shared().size()) + "threads";
}

tune::TuningKey tuningKey(const dsl::OpDef &op, const ResolvedSpecialization &spec) {
  tune::TuningKey key;
  key.op = op.name;
  key.target = tuningTargetName(spec.target);
  key.dtype = dsl::dtypeName(spec.dtype);
  key.statics = spec.statics;
  key.present = spec.inputs;
  return key;
}

Specialization specializationOf(const dsl::OpDef &op, const KernelRequest &request, const Target &target) {
  Specialization spec{request.dtype, {}, target, Schedule{}, request.with};
  std::map<std::string, int64_t> runtimeAttrs;
  splitRequest(op, request, spec.statics, runtimeAttrs);
  return spec;
}

tune::TuningKey tuningKeyOf(const std::string &op, const KernelRequest &request, const Target &target) {
  std::unique_ptr<dsl::OpDef> def = loadOp(op);
  return tuningKey(*def, resolve(*def, specializationOf(*def, request, target)));
}

std::optional<std::pair<std::string, size_t>> tokenDimOf(const dsl::OpDef &op) {
  const dsl::DimDecl *tokens = nullptr;
  for (const dsl::DimDecl &d : op.dims)
    if (d.isTokens)
      tokens = &d;
  if (!tokens)
    return std::nullopt;
  for (bool outputs : {false, true})
    for (const dsl::TensorDecl &t : op.tensors) {
      if (t.isOutput != outputs || t.optional) // an optional tensor may be absent from a call
        continue;
      for (size_t axis = 0; axis < t.shape.size(); ++axis) {
        const dsl::Expr &size = *t.shape[axis].size;
        if (!t.shape[axis].flattenLeading && size.kind == dsl::ExprKind::Name && size.name == tokens->name)
          return std::pair{t.name, axis};
      }
    }
  return std::nullopt;
}

std::optional<int64_t> tokensIn(const dsl::OpDef &op, const std::map<std::string, int64_t> &dims) {
  for (const dsl::DimDecl &d : op.dims)
    if (d.isTokens)
      if (auto it = dims.find(d.name); it != dims.end())
        return it->second;
  return std::nullopt;
}

std::optional<Schedule> tunedConfigOf(const tune::TuningFile &file, int64_t tokens, TargetKind kind,
                                      const std::string &path, const std::function<void(const std::string &)> &warn) {
  const tune::BucketResult *bucket = file.forTokens(tokens);
  if (!bucket)
    return std::nullopt;
  try {
    Schedule config = tune::parseConfig(bucket->best);
    if (std::string why = scheduleProblem(config, kind, /*requested=*/true); !why.empty())
      throw std::invalid_argument(why);
    return config;
  } catch (const std::invalid_argument &e) {
    warn(path + ": bucket " + std::to_string(tune::tokenBucket(tokens)) + ": " + e.what() + "; not using it");
    return std::nullopt;
  }
}

bool autotuneFromEnv() {
  const char *v = std::getenv("MOEC_AUTOTUNE");
  return !v || std::string(v) != "0";
}

bool printAutotuningFromEnv() {
  const char *v = std::getenv("MOEC_PRINT_AUTOTUNING");
  return v && *v && std::string(v) != "0";
}

} // namespace moec
