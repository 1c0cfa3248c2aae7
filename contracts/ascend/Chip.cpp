//===- Chip.cpp - Built-in chip files and the chip file reader ------------===//
#include "moec/contracts/ascend/Chip.h"

#include "moec/contracts/Files.h"
#include "moec/contracts/JsonFields.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

namespace moec::ascend {
namespace {

constexpr int64_t kMaxChipFileBytes = 1 << 20;

double positiveNumber(const nlohmann::json &j, const std::string &field, double max, const std::string &where) {
  if (!j.contains(field) || !j.at(field).is_number())
    throw std::runtime_error(where + ": '" + field + "' must be a number");
  double v = j.at(field).get<double>();
  if (!std::isfinite(v) || v <= 0 || v > max)
    throw std::runtime_error(where + ": '" + field + "' must be in (0, " + std::to_string(int64_t(max)) + "], got " +
                             j.at(field).dump());
  return v;
}

std::string text(const nlohmann::json &j, const std::string &field, const std::string &where) {
  if (!j.contains(field) || !j.at(field).is_string())
    throw std::runtime_error(where + ": '" + field + "' must be a string");
  return j.at(field).get<std::string>();
}

bool powerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

} // namespace

Chip chipFromJson(const std::string &source, const std::string &where) {
  nlohmann::json j = nlohmann::json::parse(source, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    throw std::runtime_error(where + ": not a JSON object");
  if (integerField(j, "format", 0, INT64_MAX, where) != 1)
    throw std::runtime_error(where + ": 'format' must be 1, got " + j.at("format").dump());
  Chip c;
  c.name = text(j, "name", where);
  if (c.name.empty() || c.name.size() > 64 ||
      c.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
          std::string::npos)
    throw std::runtime_error(where + ": 'name' must be 1 to 64 letters, digits, '_', '-' or '.', got " +
                             j.at("name").dump());
  c.description = text(j, "description", where);
  c.vectorCores = integerField(j, "vector_cores", 1, 4096, where);
  c.ubBytes = integerField(j, "ub_bytes", 1024, 64 << 20, where);
  c.ubAlignment = integerField(j, "ub_alignment", 1, 4096, where);
  if (!powerOfTwo(c.ubAlignment) || c.ubBytes % c.ubAlignment != 0)
    throw std::runtime_error(where + ": 'ub_alignment' must be a power of two that divides 'ub_bytes', got " +
                             std::to_string(c.ubAlignment));
  c.burstBytes = integerField(j, "burst_bytes", 1, 1 << 20, where);
  c.maxCopyBytes = integerField(j, "max_copy_bytes", c.ubAlignment, int64_t(1) << 32, where);
  c.systemWorkspaceBytes = integerField(j, "system_workspace_bytes", 0, int64_t(1) << 40, where);
  c.gmGBpsPerCore = positiveNumber(j, "gm_gbps_per_core", 1e6, where);
  c.dataCopyNs = positiveNumber(j, "data_copy_ns", 1e9, where);
  c.scalarReadNs = positiveNumber(j, "scalar_read_ns", 1e9, where);
  c.coreLaunchNs = positiveNumber(j, "core_launch_ns", 1e9, where);
  c.syncAllNs = j.contains("sync_all_ns") ? positiveNumber(j, "sync_all_ns", 1e9, where) : c.coreLaunchNs;
  return c;
}

Chip loadChipFile(const std::string &path) {
  std::string source = readRegularFile(path);
  if (int64_t(source.size()) > kMaxChipFileBytes)
    throw std::runtime_error(path + ": a chip file is at most 1 MiB; this one has " + std::to_string(source.size()) +
                             " bytes");
  return chipFromJson(source, path);
}

std::string builtinChipNames() {
  std::string names;
  for (const BuiltinChipFile &f : builtinChipFiles())
    names += std::string(names.empty() ? "" : ", ") + f.name;
  return names;
}

Chip builtinChip(const std::string &name) {
  for (const BuiltinChipFile &f : builtinChipFiles())
    if (name == f.name)
      return chipFromJson(f.text, f.path);
  throw std::invalid_argument("unknown chip '" + name + "' (built-in: " + builtinChipNames() +
                              "; or give --chip-file)");
}

std::string chipKeyText(const Chip &c) {
  nlohmann::json j = {{"name", c.name},
                      {"vector_cores", c.vectorCores},
                      {"ub_bytes", c.ubBytes},
                      {"ub_alignment", c.ubAlignment},
                      {"burst_bytes", c.burstBytes},
                      {"max_copy_bytes", c.maxCopyBytes},
                      {"system_workspace_bytes", c.systemWorkspaceBytes},
                      {"gm_gbps_per_core", c.gmGBpsPerCore},
                      {"data_copy_ns", c.dataCopyNs},
                      {"scalar_read_ns", c.scalarReadNs},
                      {"core_launch_ns", c.coreLaunchNs},
                      {"sync_all_ns", c.syncAllNs}};
  return j.dump();
}

} // namespace moec::ascend
