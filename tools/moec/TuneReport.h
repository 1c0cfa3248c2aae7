//===- TuneReport.h - What a sweep shows: the ranked table, the CSV, the plot -*- C++ -*-===//
#pragma once

#include "moec/jit/Tuner.h"

#include <string>

namespace moec::cli {

/// Per token count: the timed configs ranked by median time, each against the heuristic and the
/// baseline, then how many were pruned, failed, mismatched or left untimed.
std::string rankedTable(const TuneResult &result, const std::string &baselineName, size_t top);

/// One row per point: tokens, bucket, config, its knobs, family, status, times, fractions, marks.
std::string sweepCsv(const TuneResult &result);

/// The sweep's counts: configs considered, pruned, compiled, failed, timed earlier; how long the compiles
/// and the timing took, and what the budget (of the timing alone) left untimed.
std::string sweepSummary(const TuneResult &result, double budgetSeconds);

/// Writes `<stem>.csv` (every point), and `<stem>.dat` and `<stem>.gp` (TunePlot.h's picture of the largest
/// token count with a timed config), and runs gnuplot on the script to make `<stem>.svg`. Returns the files
/// written; a missing gnuplot is a note, not an error (the script is still there to run), and so is a sweep
/// with nothing timed (no plot).
std::vector<std::string> writeSweepReport(const TuneResult &result, const std::string &stem, const std::string &title,
                                          const std::string &baselineName, TargetKind kind, std::string &note);

/// Removes the report files of `dir` that moec wrote (`<cache>/tuning/reports`): scripts and data files
/// that open with TunePlot.h's marker, CSVs that open with sweepCsv's header, and the pictures (.svg, .png)
/// of a script of moec's; then the folder, if it is empty. `leftAlone` counts what else is there.
size_t removeReports(const std::string &dir, size_t &leftAlone);

} // namespace moec::cli
