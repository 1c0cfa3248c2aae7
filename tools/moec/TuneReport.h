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

/// Writes `<stem>.csv`, `<stem>.dat` and `<stem>.gp`, and runs gnuplot on the script to make `<stem>.svg`:
/// each config's throughput (minimum bytes / median time) against its vector width (an Ascend config's
/// chunk), one line per config family, the baseline (`baselineName`: the same-run copy, or the chip's
/// bound), the heuristic and the best marked, for the largest token count swept. Returns the files
/// written; a missing gnuplot is a note, not an error (the script is still there to run).
std::vector<std::string> writeSweepReport(const TuneResult &result, const std::string &stem, const std::string &title,
                                          const std::string &baselineName, std::string &note);

} // namespace moec::cli
