//===- TuneReport.cpp - The ranked table, the CSV and the gnuplot plot ----===//
#include "TuneReport.h"

#include "Common.h"
#include "TunePlot.h"

#include "moec/tune/TuningDb.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sys/wait.h>
#include <unistd.h>

namespace moec::cli {

namespace {

constexpr const char *kCsvHeader = "tokens,bucket,config,vector,threads,rows,unroll,off,on,buffers,chunk,family,status,"
                                   "median_us,min_us,baseline_us,fraction_of_baseline,is_heuristic,is_best,why\n";

bool ranks(const TunePoint &p) {
  return p.status == TunePoint::Status::Timed || p.status == TunePoint::Status::Reused;
}

/// The points of one token count, in sweep order.
std::map<int64_t, std::vector<const TunePoint *>> byTokens(const TuneResult &result) {
  std::map<int64_t, std::vector<const TunePoint *>> groups;
  for (const TunePoint &p : result.points)
    groups[p.tokens].push_back(&p);
  return groups;
}

const TunePoint *fastest(const std::vector<const TunePoint *> &points) {
  const TunePoint *best = nullptr;
  for (const TunePoint *p : points)
    if (ranks(*p) && (!best || tune::ranksBefore(p->text, p->medianUs, best->text, best->medianUs)))
      best = p;
  return best;
}

const TunePoint *heuristicOf(const std::vector<const TunePoint *> &points) {
  for (const TunePoint *p : points)
    if (p->config == Schedule{})
      return p;
  return nullptr;
}

std::string csvField(const std::string &s) {
  if (s.find_first_of(",\"\n") == std::string::npos)
    return s;
  std::string q = "\"";
  for (char c : s)
    q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

/// Runs `gnuplot script`; "" on success, else why not.
std::string runGnuplot(const std::string &script) {
  pid_t pid = fork();
  if (pid < 0)
    return "cannot start gnuplot";
  if (pid == 0) {
    execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    return "gnuplot is not installed (apt install gnuplot-nox); run `gnuplot " + script + "` later for the plot";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "gnuplot failed on " + script;
  return "";
}

} // namespace

std::string rankedTable(const TuneResult &result, const std::string &baselineName, size_t top) {
  std::string out;
  for (const auto &[tokens, points] : byTokens(result)) {
    std::vector<const TunePoint *> timed;
    std::map<TunePoint::Status, size_t> counts;
    for (const TunePoint *p : points) {
      ++counts[p->status];
      if (ranks(*p))
        timed.push_back(p);
    }
    std::sort(timed.begin(), timed.end(), [](const TunePoint *a, const TunePoint *b) {
      return tune::ranksBefore(a->text, a->medianUs, b->text, b->medianUs);
    });
    const TunePoint *heuristic = heuristicOf(points);
    out += fmt::format("\ntokens {} (bucket {}): {} configs timed or reused\n", tokens, tune::tokenBucket(tokens),
                       timed.size());
    size_t width = 64; // the config column holds the longest config shown
    for (size_t i = 0; i < timed.size(); ++i)
      if (i < top || timed[i] == heuristic)
        width = std::max(width, timed[i]->text.size());
    out += fmt::format("{:>4}  {:<{}} {:>11} {:>11} {:>13} {:>9}\n", "rank", "config", width, "median us", "min us",
                       "vs heuristic", "vs " + baselineName);
    for (size_t i = 0; i < timed.size(); ++i) {
      if (i >= top && timed[i] != heuristic)
        continue; // the heuristic's row is shown wherever it ranks
      const TunePoint &p = *timed[i];
      std::string vsHeuristic = heuristic && ranks(*heuristic) ? fmt::format("{:.3f}x", heuristic->medianUs / p.medianUs) : "-";
      std::string vsBase = p.baselineUs > 0 ? fmt::format("{:.2f}", p.baselineUs / p.medianUs) : "-";
      std::string min = p.status == TunePoint::Status::Reused ? "(earlier)" : fmt::format("{:.1f}", p.minUs);
      out += fmt::format("{:>4}  {:<{}} {:>11.1f} {:>11} {:>13} {:>9}\n", i + 1, p.text, width, p.medianUs, min,
                         vsHeuristic, vsBase);
    }
    out += fmt::format("      of {} configs: timed {}, reused {}, pruned {}, failed to compile {}, outputs differ {}, "
                       "untimed {}\n",
                       points.size(), counts[TunePoint::Status::Timed], counts[TunePoint::Status::Reused],
                       counts[TunePoint::Status::Pruned], counts[TunePoint::Status::Failed],
                       counts[TunePoint::Status::Mismatch], counts[TunePoint::Status::Untimed]);
  }
  return out;
}

std::string sweepSummary(const TuneResult &result, double budgetSeconds) {
  std::string out = fmt::format("\n{} configs: {} pruned, {} compiled, {} failed to compile", result.considered,
                                result.pruned, result.compiled, result.failed);
  if (result.timedEarlier)
    out += fmt::format(", {} not compiled (timed by an earlier sweep at every token count)", result.timedEarlier);
  out += fmt::format("; the compiles took {:.1f} s\n", result.compileSeconds);
  size_t untimed = 0;
  for (const TunePoint &p : result.points)
    untimed += p.status == TunePoint::Status::Untimed;
  out += fmt::format("the timing took {:.1f} s", result.timingSeconds);
  if (budgetSeconds > 0)
    out += result.budgetSpent ? fmt::format(", past its budget of {:g} s: {} points untimed (a later sweep times them)",
                                            budgetSeconds, untimed)
                              : fmt::format(", within its budget of {:g} s", budgetSeconds);
  return out + "\n";
}

std::string sweepCsv(const TuneResult &result) {
  std::string csv = kCsvHeader;
  for (const auto &[tokens, points] : byTokens(result)) {
    const TunePoint *best = fastest(points);
    for (const TunePoint *p : points) {
      const Schedule &s = p->config;
      auto field = [&](const std::string &name) { // "a+b" of ",name=a+b", or ""
        size_t at = p->text.find("," + name + "=");
        if (at == std::string::npos)
          return std::string();
        at += name.size() + 2;
        return p->text.substr(at, p->text.find(',', at) - at);
      };
      double fraction = p->baselineUs > 0 && p->medianUs > 0 ? p->baselineUs / p->medianUs : 0;
      csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.4f},{},{},{}\n", tokens,
                         tune::tokenBucket(tokens), csvField(p->text), s.vector, s.threads, s.rowsPerBlock, s.unroll,
                         csvField(field("off")), csvField(field("on")), s.buffers, s.chunk, csvField(s == Schedule{} ? "heuristic" : tune::familyOf(s)),
                         statusName(p->status), p->medianUs, p->minUs, p->baselineUs, fraction,
                         s == Schedule{} ? 1 : 0, p == best ? 1 : 0, csvField(p->why));
    }
  }
  return csv;
}

std::vector<std::string> writeSweepReport(const TuneResult &result, const std::string &stem, const std::string &title,
                                          const std::string &baselineName, TargetKind kind, std::string &note) {
  std::vector<std::string> written;
  writeFile(stem + ".csv", sweepCsv(result));
  written.push_back(stem + ".csv");
  // The picture is of the largest token count that has a timed config.
  auto groups = byTokens(result);
  const std::vector<const TunePoint *> *points = nullptr;
  for (const auto &[tokens, group] : groups)
    if (fastest(group))
      points = &group;
  if (!points) {
    note = "nothing was timed: no plot";
    return written;
  }
  // The script names its data and its picture by absolute paths: it runs from any folder.
  std::string absolute = std::filesystem::absolute(stem).string();
  SweepPlot plot = sweepPlot(*points, absolute, absolute + ".dat", title, baselineName, kind, 12);
  writeFile(stem + ".dat", plot.data);
  written.push_back(stem + ".dat");
  writeFile(stem + ".gp", plot.script);
  written.push_back(stem + ".gp");
  note = runGnuplot(stem + ".gp");
  if (note.empty())
    written.push_back(stem + ".svg");
  return written;
}

size_t removeReports(const std::string &dir, size_t &leftAlone) {
  namespace fs = std::filesystem;
  auto opensWith = [](const fs::path &path, const std::string &start) {
    std::ifstream in(path, std::ios::binary);
    std::string head(start.size(), '\0');
    return in.read(head.data(), std::streamsize(head.size())) && head == start;
  };
  auto regular = [](const fs::path &path) {
    std::error_code ec;
    return fs::symlink_status(path, ec).type() == fs::file_type::regular;
  };
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec)))
    return 0;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    files.push_back(it->path());
  if (ec)
    throw std::runtime_error("cannot read '" + dir + "': " + ec.message());
  std::string marker = std::string(kPlotMarker) + " ";
  std::vector<fs::path> ours;
  for (const fs::path &path : files) {
    std::string ext = path.extension().string();
    fs::path script = fs::path(path).replace_extension(".gp");
    bool mine = regular(path) &&
                (ext == ".gp" || ext == ".dat"   ? opensWith(path, marker)
                 : ext == ".csv"                 ? opensWith(path, kCsvHeader)
                 : ext == ".svg" || ext == ".png" ? regular(script) && opensWith(script, marker) &&
                                                       opensWith(path, ext == ".svg" ? "<?xml" : "\x89PNG")
                                                  : false);
    if (mine)
      ours.push_back(path);
    else
      ++leftAlone;
  }
  size_t removed = 0;
  for (const fs::path &path : ours) {
    if (!fs::remove(path, ec) && ec)
      throw std::runtime_error("cannot remove '" + path.string() + "': " + ec.message());
    ++removed;
  }
  if (fs::is_empty(dir, ec)) // moec's folder, and no file in it now
    fs::remove(dir, ec);
  return removed;
}

} // namespace moec::cli
