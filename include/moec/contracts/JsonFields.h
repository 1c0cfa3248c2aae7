//===- JsonFields.h - Reading checked fields of JSON that anyone can edit -*- C++ -*-===//
//
// Cache records, bundles, chip files and tilings are read by the same rules.
//===----------------------------------------------------------------------===//
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace moec {

/// The integer `j[field]`, checked to be an integer (not 1.5, not 1e20) in [min, max]. Throws
/// std::runtime_error "<where>: '<field>' ..." otherwise.
int64_t integerField(const nlohmann::json &j, const std::string &field, int64_t min, int64_t max,
                     const std::string &where);

} // namespace moec
