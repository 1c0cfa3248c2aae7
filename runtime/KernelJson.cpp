//===- KernelJson.cpp - Kernel records in bundle.json and cache meta.json --===//
#include "moec/runtime/KernelJson.h"

#include <limits>
#include <stdexcept>

namespace moec {

namespace {

std::string stringField(const nlohmann::json &j, const std::string &field, const std::string &where) {
  if (!j.contains(field) || !j.at(field).is_string() || j.at(field).get<std::string>().empty())
    throw std::runtime_error(where + ": '" + field + "' must be a non-empty string");
  return j.at(field).get<std::string>();
}

} // namespace

nlohmann::json kernelMetaToJson(const KernelMeta &k) {
  nlohmann::json checks = nlohmann::json::array();
  for (const dsl::IndexCheck &c : k.checks)
    checks.push_back({c.tensor, c.line, c.col});
  return {{"name", k.name},
          {"output", k.output},
          {"rowsPerBlock", k.schedule.rowsPerBlock},
          {"threads", k.schedule.threads},
          {"vector", k.schedule.vector},
          {"unroll", k.schedule.unroll},
          {"pointPerWarp", k.pointPerWarp},
          {"rowGroups", k.rowGroups},
          {"pointRuns", k.pointRuns},
          {"checks", checks}};
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
  if (!j.contains("rowGroups") || !j.at("rowGroups").is_boolean())
    throw std::runtime_error(where + ": 'rowGroups' must be true or false");
  k.rowGroups = j.at("rowGroups").get<bool>();
  if (!j.contains("pointRuns") || !j.at("pointRuns").is_boolean())
    throw std::runtime_error(where + ": 'pointRuns' must be true or false");
  k.pointRuns = j.at("pointRuns").get<bool>();
  // Each says what the launch covers: at most one of them holds.
  if (int(k.pointPerWarp) + int(k.rowGroups) + int(k.pointRuns) > 1)
    throw std::runtime_error(where + ": at most one of 'pointPerWarp', 'rowGroups' and 'pointRuns' may be true");
  // The bounds checks only name what the kernel reports; the runtime still checks the tensor index
  // against the op before it uses one.
  if (!j.contains("checks") || !j.at("checks").is_array())
    throw std::runtime_error(where + ": 'checks' must be a list");
  for (size_t i = 0; i < j.at("checks").size(); ++i) {
    const nlohmann::json &c = j.at("checks")[i];
    std::string at = where + ": checks[" + std::to_string(i) + "]";
    if (!c.is_array() || c.size() != 3)
      throw std::runtime_error(at + " must be [tensor, line, col]");
    nlohmann::json named = {{"tensor", c[0]}, {"line", c[1]}, {"col", c[2]}};
    k.checks.push_back({int(integerField(named, "tensor", dsl::IndexCheck::kDivision, 1 << 16, at)),
                        int(integerField(named, "line", 0, 1 << 30, at)), int(integerField(named, "col", 0, 1 << 30, at))});
  }
  return k;
}

std::vector<std::string> workspaceFromJson(const nlohmann::json &j, const std::string &where) {
  if (!j.is_object() || !j.contains("workspace") || !j.at("workspace").is_array())
    throw std::runtime_error(where + ": 'workspace' must be a list of output names");
  std::vector<std::string> names;
  for (const nlohmann::json &name : j.at("workspace")) {
    if (!name.is_string() || name.get<std::string>().empty())
      throw std::runtime_error(where + ": 'workspace' must be a list of output names, got " + name.dump());
    names.push_back(name.get<std::string>());
  }
  return names;
}

} // namespace moec
