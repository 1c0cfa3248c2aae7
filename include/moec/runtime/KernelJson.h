//===- KernelJson.h - Kernel records in bundle.json and cache meta.json -*- C++ -*-===//
//
// A kernel record decides what code runs and how it is launched, and both files it is read from can be
// edited by anyone: every field is checked on the way in, by the same rules for both files.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/Kernel.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace moec {

/// The integer `j[field]`, checked to be an integer (not 1.5, not 1e20) in [min, max]. Throws
/// std::runtime_error "<where>: '<field>' ..." otherwise.
int64_t integerField(const nlohmann::json &j, const std::string &field, int64_t min, int64_t max,
                     const std::string &where);

/// {"name", "output", "rowsPerBlock", "threads", "vector", "unroll", "pointPerWarp", "checks", "rowGroups",
/// "pointRuns"};
/// each check is [tensor, line, col] (dsl::IndexCheck).
nlohmann::json kernelMetaToJson(const KernelMeta &k);

/// The record written by kernelMetaToJson, every field checked (the schedule by scheduleProblem in
/// moec/compiler/Schedule.h). Throws
/// std::runtime_error naming `where` (the file and the record) and the field.
KernelMeta kernelMetaFromJson(const nlohmann::json &j, TargetKind target, const std::string &where);

/// The `workspace` field of a cache entry or bundle entry `j` (LoadedOp::workspace): a list of output
/// names, each checked to be a non-empty string; LoadedOp::plan() checks them against the op.
std::vector<std::string> workspaceFromJson(const nlohmann::json &j, const std::string &where);

} // namespace moec
