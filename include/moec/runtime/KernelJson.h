//===- KernelJson.h - Kernel records in bundle.json and cache meta.json -*- C++ -*-===//
//
// A kernel record decides what code runs and how it is launched, and both files it is read from can be
// edited by anyone: every field is checked on the way in, by the same rules for both files.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/contracts/JsonFields.h"
#include "moec/runtime/Kernel.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace moec {

/// {"name", "output", "rowsPerBlock", "threads", "vector", "unroll", "pointPerWarp", "checks", "rowGroups",
/// "pointRuns"};
/// each check is [tensor, line, col] (dsl::IndexCheck).
nlohmann::json kernelMetaToJson(const KernelMeta &k);

/// The record written by kernelMetaToJson, every field checked (the schedule by scheduleProblem in
/// moec/contracts/Schedule.h). Throws
/// std::runtime_error naming `where` (the file and the record) and the field.
KernelMeta kernelMetaFromJson(const nlohmann::json &j, TargetKind target, const std::string &where);

/// The `workspace` field of a cache entry or bundle entry `j` (LoadedOp::workspace): a list of output
/// names, each checked to be a non-empty string; LoadedOp::plan() checks them against the op.
std::vector<std::string> workspaceFromJson(const nlohmann::json &j, const std::string &where);

} // namespace moec
