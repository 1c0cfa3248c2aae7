//===- KernelJson.cpp - Kernel records in bundle.json and cache meta.json --===//
#include "moec/runtime/KernelJson.h"

#include <limits>
#include <stdexcept>

namespace moec {

namespace {

constexpr int64_t kMaxBlockThreads = 1024; // CUDA's limit on threads per block

std::string range(int64_t value, int64_t min, int64_t max) {
  return std::to_string(value) + " is not in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string stringField(const nlohmann::json &j, const std::string &field, const std::string &where) {
  if (!j.contains(field) || !j.at(field).is_string() || j.at(field).get<std::string>().empty())
    throw std::runtime_error(where + ": '" + field + "' must be a non-empty string");
  return j.at(field).get<std::string>();
}

} // namespace

std::string scheduleProblem(const Schedule &s, TargetKind target) {
  if (s.threads < 1 || s.threads > kMaxBlockThreads)
    return "'threads': " + range(s.threads, 1, kMaxBlockThreads);
  if (target == TargetKind::GPU && s.threads % 32 != 0)
    return "'threads': " + std::to_string(s.threads) + " is not a multiple of 32 (a warp)";
  if (s.rowsPerBlock < 1 || s.rowsPerBlock > kMaxBlockThreads / s.threads)
    return "'rowsPerBlock': " + range(s.rowsPerBlock, 1, kMaxBlockThreads / s.threads) + " (threads * rowsPerBlock <= " +
           std::to_string(kMaxBlockThreads) + ")";
  if (s.vector != 1 && s.vector != 2 && s.vector != 4 && s.vector != 8 && s.vector != 16)
    return "'vector': " + std::to_string(s.vector) + " is not 1, 2, 4, 8 or 16";
  if (s.unroll < 0 || s.unroll > 64)
    return "'unroll': " + range(s.unroll, 0, 64);
  return "";
}

int64_t integerField(const nlohmann::json &j, const std::string &field, int64_t min, int64_t max,
                     const std::string &where) {
  if (!j.is_object() || !j.contains(field))
    throw std::runtime_error(where + ": '" + field + "' is missing");
  const nlohmann::json &v = j.at(field);
  // A number too big for int64 parses as unsigned or float: both are rejected here.
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())))
    throw std::runtime_error(where + ": '" + field + "' must be an integer, got " + v.dump());
  int64_t value = v.get<int64_t>();
  if (value < min || value > max)
    throw std::runtime_error(where + ": '" + field + "': " + range(value, min, max));
  return value;
}

nlohmann::json kernelMetaToJson(const KernelMeta &k) {
  return {{"name", k.name},
          {"output", k.output},
          {"rowsPerBlock", k.schedule.rowsPerBlock},
          {"threads", k.schedule.threads},
          {"vector", k.schedule.vector},
          {"unroll", k.schedule.unroll},
          {"pointPerWarp", k.pointPerWarp}};
}

KernelMeta kernelMetaFromJson(const nlohmann::json &j, TargetKind target, const std::string &where) {
  if (!j.is_object())
    throw std::runtime_error(where + ": a kernel must be an object, got " + j.dump());
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  KernelMeta k;
  k.name = stringField(j, "name", where);
  k.output = stringField(j, "output", where);
  // Ranges come from scheduleProblem, which names the field; here only that each is an integer.
  k.schedule = {integerField(j, "rowsPerBlock", kMin, kMax, where), integerField(j, "threads", kMin, kMax, where),
                integerField(j, "vector", kMin, kMax, where), integerField(j, "unroll", kMin, kMax, where)};
  if (std::string problem = scheduleProblem(k.schedule, target); !problem.empty())
    throw std::runtime_error(where + ": " + problem);
  if (!j.contains("pointPerWarp") || !j.at("pointPerWarp").is_boolean())
    throw std::runtime_error(where + ": 'pointPerWarp' must be true or false");
  k.pointPerWarp = j.at("pointPerWarp").get<bool>();
  return k;
}

} // namespace moec
