//===- TilingJson.cpp - KernelTiling to JSON and back, checked --------------===//
//
// A tiling read back from the plan cache decides how much UB a kernel takes and how many copies it makes,
// and anyone can edit the file: every field is checked, and the whole against the chip.
//===----------------------------------------------------------------------===//
#include "moec/contracts/ascend/Tiling.h"

#include "moec/contracts/JsonFields.h"

#include <stdexcept>

namespace moec::ascend {
namespace {

constexpr int64_t kMaxRowLength = (int64_t(1) << 31) - 1;
constexpr int64_t kMaxCount = int64_t(1) << 40;

bool boolField(const nlohmann::json &j, const std::string &field, const std::string &where) {
  if (!j.contains(field) || !j.at(field).is_boolean())
    throw std::runtime_error(where + ": '" + field + "' must be true or false");
  return j.at(field).get<bool>();
}

std::string nameField(const nlohmann::json &j, const std::string &field, const std::string &where) {
  if (!j.contains(field) || !j.at(field).is_string() || j.at(field).get<std::string>().empty() ||
      j.at(field).get<std::string>().size() > 256)
    throw std::runtime_error(where + ": '" + field + "' must be a string of 1 to 256 characters");
  return j.at(field).get<std::string>();
}

/// A buffer's "name", "<prefix>.<tensor>", as its role and tensor: the role decides how the buffer is
/// placed, so a prefix no role has is an error rather than a buffer of no role.
void bufferNameField(const nlohmann::json &j, const std::string &where, UbBuffer &b) {
  std::string name = nameField(j, "name", where);
  size_t dot = name.find('.');
  std::optional<UbRole> role = dot == std::string::npos ? std::nullopt : ubRoleFromPrefix(name.substr(0, dot));
  if (!role || dot + 1 == name.size())
    throw std::runtime_error(where + ": 'name' must be <role>.<tensor> with a role of in, out, row, acc, idx or "
                                     "cast, got '" + name + "'");
  b.role = *role;
  b.tensor = name.substr(dot + 1);
}

} // namespace

nlohmann::json tilingToJson(const KernelTiling &t) {
  nlohmann::json buffers = nlohmann::json::array();
  for (const UbBuffer &b : t.buffers)
    buffers.push_back({{"name", b.name()},
                       {"element_bytes", b.elementBytes},
                       {"copies", b.copies},
                       {"per_row_of_pass", b.perRowOfPass},
                       {"fixed_bytes_per_row", b.fixedBytesPerRow},
                       {"reuse_dims", b.reuseDims},
                       {"copies_per_chunk", b.copiesPerChunk},
                       {"whole_row", b.wholeRow}});
  return {{"kernel", t.kernel},
          {"output", t.output},
          {"row_length", t.rowLength},
          {"chunk", t.chunk},
          {"chunks", t.chunks},
          {"buffer_count", t.bufferCount},
          {"max_rows_per_pass", t.maxRowsPerPass},
          {"point_rows", t.pointRows},
          {"guarded_rows", t.guardedRows},
          {"buffers", buffers},
          {"row_copies_per_chunk", t.rowCopiesPerChunk},
          {"pass_copies_per_chunk", t.passCopiesPerChunk},
          {"pass_copies", t.passCopies},
          {"row_scalars", t.rowScalars},
          {"row_bytes", t.rowBytes}};
}

KernelTiling tilingFromJson(const nlohmann::json &j, const Chip &chip, const std::string &where) {
  if (!j.is_object())
    throw std::runtime_error(where + ": a tiling must be an object");
  KernelTiling t;
  t.kernel = nameField(j, "kernel", where);
  t.output = nameField(j, "output", where);
  t.rowLength = integerField(j, "row_length", 1, kMaxRowLength, where);
  t.chunk = integerField(j, "chunk", 1, kMaxRowLength, where);
  t.chunks = integerField(j, "chunks", 1, kMaxRowLength, where);
  if (t.chunks != (t.rowLength + t.chunk - 1) / t.chunk)
    throw std::runtime_error(where + ": 'chunks' must be ceil(row_length / chunk) = " +
                             std::to_string((t.rowLength + t.chunk - 1) / t.chunk) + ", got " +
                             std::to_string(t.chunks));
  t.bufferCount = integerField(j, "buffer_count", 1, 2, where);
  t.maxRowsPerPass = integerField(j, "max_rows_per_pass", 1, 65535, where);
  t.pointRows = boolField(j, "point_rows", where);
  t.guardedRows = boolField(j, "guarded_rows", where);
  t.rowCopiesPerChunk = integerField(j, "row_copies_per_chunk", 0, kMaxCount, where);
  t.passCopiesPerChunk = integerField(j, "pass_copies_per_chunk", 0, kMaxCount, where);
  t.passCopies = integerField(j, "pass_copies", 0, kMaxCount, where);
  t.rowScalars = integerField(j, "row_scalars", 0, kMaxCount, where);
  t.rowBytes = integerField(j, "row_bytes", 0, kMaxCount, where);
  if (!j.contains("buffers") || !j.at("buffers").is_array() || j.at("buffers").size() > 64)
    throw std::runtime_error(where + ": 'buffers' must be a list of at most 64 buffers");
  for (size_t i = 0; i < j.at("buffers").size(); ++i) {
    const nlohmann::json &b = j.at("buffers")[i];
    std::string at = where + ": buffers[" + std::to_string(i) + "]";
    if (!b.is_object())
      throw std::runtime_error(at + " must be an object");
    UbBuffer &buffer = t.buffers.emplace_back();
    bufferNameField(b, at, buffer);
    buffer.elementBytes = integerField(b, "element_bytes", 0, 8, at);
    buffer.copies = integerField(b, "copies", 1, 2, at);
    buffer.perRowOfPass = boolField(b, "per_row_of_pass", at);
    buffer.fixedBytesPerRow = integerField(b, "fixed_bytes_per_row", 0, chip.ubBytes, at);
    buffer.reuseDims = integerField(b, "reuse_dims", 0, 16, at);
    buffer.copiesPerChunk = integerField(b, "copies_per_chunk", 0, kMaxCount, at);
    buffer.wholeRow = b.contains("whole_row") && boolField(b, "whole_row", at);
    if (buffer.wholeRow && (buffer.reuseDims == 0 || buffer.elementBytes == 0))
      throw std::runtime_error(at + ": 'whole_row' is for a kept input ('reuse_dims' > 0, 'element_bytes' > 0)");
    if (buffer.elementBytes * t.chunk > chip.maxCopyBytes)
      throw std::runtime_error(at + ": a chunk of " + std::to_string(t.chunk) + " elements is over the chip's " +
                               std::to_string(chip.maxCopyBytes) + " B copy limit");
  }
  if (int64_t used = ubBytes(t, 1, chip.ubAlignment); used > chip.ubBytes)
    throw std::runtime_error(where + ": the buffers take " + std::to_string(used) + " B of UB; chip '" + chip.name +
                             "' has " + std::to_string(chip.ubBytes));
  if (t.maxRowsPerPass > 1 && ubBytes(t, t.maxRowsPerPass, chip.ubAlignment) > chip.ubBytes)
    throw std::runtime_error(where + ": 'max_rows_per_pass' " + std::to_string(t.maxRowsPerPass) +
                             " rows do not fit chip '" + chip.name + "''s UB");
  return t;
}

} // namespace moec::ascend
