//===- NearestName.h - "did you mean ...?" for a misspelt name ---*- C++ -*-===//
//
// The compiler, the runtime and the tools all reject unknown dim and attribute names; each suggests the
// nearest known one the same way. Here rather than in the compiler so that the runtime, which links no
// LLVM, can use it too.
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moec {

/// The Levenshtein distance between `a` and `b` (insertions, deletions and replacements), ignoring ASCII case.
size_t editDistanceInsensitive(std::string_view a, std::string_view b);

/// The candidate nearest `name`, when it is a typo of it: at most a third of the name's letters away
/// (one at least) and never all of them ('X' is no 'H'). Else "". The first of equally near ones wins.
std::string nearestName(std::string_view name, const std::vector<std::string> &candidates);

/// "; did you mean 'top_k'?" for the nearest candidate (nearestName), else "": the tail of an error message.
std::string didYouMean(std::string_view name, const std::vector<std::string> &candidates);

} // namespace moec
