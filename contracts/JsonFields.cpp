//===- JsonFields.cpp - Reading checked fields of JSON ---------------------===//
#include "moec/contracts/JsonFields.h"

#include <limits>
#include <stdexcept>

namespace moec {
namespace {

std::string range(int64_t value, int64_t min, int64_t max) {
  return std::to_string(value) + " is not in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

} // namespace

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

} // namespace moec
