//===- KernelMetaJson.h - A kernel's metadata as stored on disk --*- C++ -*-===//
//
// One format for the disk cache's meta.json and for bundle.json, so both describe a kernel the same way.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/Kernel.h"

#include <nlohmann/json.hpp>

namespace moec {

nlohmann::json kernelMetaToJson(const KernelMeta &k);

/// Throws nlohmann::json::exception for a missing or mistyped field.
KernelMeta kernelMetaFromJson(const nlohmann::json &j);

} // namespace moec
