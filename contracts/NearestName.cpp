//===- NearestName.cpp - "did you mean ...?" for a misspelt name ----------===//
#include "moec/contracts/NearestName.h"

#include <algorithm>
#include <numeric>

namespace moec {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

} // namespace

size_t editDistanceInsensitive(std::string_view a, std::string_view b) {
  // One row of the table at a time: row[j] is the distance between a's prefix so far and b[0, j).
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t(0));
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0]; // the previous row's row[j - 1]
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      size_t replace = diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      row[j] = std::min({replace, above + 1, row[j - 1] + 1});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearestName(std::string_view name, const std::vector<std::string> &candidates) {
  if (name.empty())
    return "";
  size_t most = std::min<size_t>(std::max<size_t>(1, name.size() / 3), name.size() - 1);
  std::string best;
  size_t bestDistance = most + 1;
  for (const std::string &c : candidates) {
    size_t d = editDistanceInsensitive(name, c);
    if (d < bestDistance)
      best = c, bestDistance = d;
  }
  return best;
}

std::string didYouMean(std::string_view name, const std::vector<std::string> &candidates) {
  std::string best = nearestName(name, candidates);
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

} // namespace moec
