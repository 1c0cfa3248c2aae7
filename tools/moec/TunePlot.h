//===- TunePlot.h - The picture of a sweep: ranked bars and one panel per knob -*- C++ -*-===//
//
// One picture per sweep, for one token count, drawn by gnuplot from a data file and a script that moec
// writes:
//   - on top, the ranked configs as horizontal bars of their median time, best first (the best red, the
//     heuristic dark; the first `top` and the heuristic wherever it ranks), against the same-run baseline
//     (dotted) and the heuristic (dashed) as reference lines;
//   - below, one panel per knob that the timed configs vary (vector, unroll, rows, off, ...; on Ascend
//     buffers, rows, chunk): the best time at each of its values, against the same two lines.
// Every axis is categorical or starts at zero and ends past the largest value plotted, and the margins
// hold the longest label, so nothing is drawn outside the picture (tests/lit/CLI/tune-plot.test renders it
// to PNG and checks).
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/jit/Tuner.h"

#include <string>
#include <vector>

namespace moec::cli {

struct SweepPlot {
  std::string data;   // gnuplot data blocks (`index 0`: the ranking, `index k`: knob k's panel)
  std::string script; // reads `dataPath`, writes `<stem>.svg` (or `<stem>.png` under -e "format='png'")
};

/// The first line of every script and data file the plot writes: `moec cache clear --tuning` removes
/// only report files that carry it (or whose script does).
inline constexpr const char *kPlotMarker = "# moec tune report";

/// The picture of `points` (one token count's, at least one timed or reused). `title` names the sweep,
/// `baselineName` the reference ("the same-run memcpy", "the chip's GM bound"); `kind` the target, which names
/// the knobs' meanings.
SweepPlot sweepPlot(const std::vector<const TunePoint *> &points, const std::string &stem, const std::string &dataPath,
                    const std::string &title, const std::string &baselineName, TargetKind kind, size_t top);

} // namespace moec::cli
