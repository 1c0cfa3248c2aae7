//===- KernelMetaJson.cpp ---------------------------------------------------===//
#include "moec/runtime/KernelMetaJson.h"

namespace moec {

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
          {"checks", checks}};
}

KernelMeta kernelMetaFromJson(const nlohmann::json &j) {
  KernelMeta k{j.at("name"),
               j.at("output"),
               {j.at("rowsPerBlock"), j.at("threads"), j.at("vector"), j.at("unroll")},
               j.at("pointPerWarp"),
               {}};
  for (const auto &c : j.at("checks"))
    k.checks.push_back({c.at(0).get<int>(), c.at(1).get<int>(), c.at(2).get<int>()});
  return k;
}

} // namespace moec
