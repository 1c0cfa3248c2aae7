//===- TuneReport.cpp - The ranked table, the CSV and the gnuplot plot ----===//
#include "TuneReport.h"

#include "Common.h"

#include "moec/dsl/Printer.h"
#include "moec/tune/TuningDb.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sys/wait.h>
#include <unistd.h>

namespace moec::cli {

namespace {

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
    out += fmt::format("{:>4}  {:<64} {:>11} {:>11} {:>13} {:>9}\n", "rank", "config", "median us", "min us",
                       "vs heuristic", "vs " + baselineName);
    for (size_t i = 0; i < timed.size(); ++i) {
      if (i >= top && timed[i] != heuristic)
        continue; // the heuristic's row is shown wherever it ranks
      const TunePoint &p = *timed[i];
      std::string vsHeuristic = heuristic && ranks(*heuristic) ? fmt::format("{:.3f}x", heuristic->medianUs / p.medianUs) : "-";
      std::string vsBase = p.baselineUs > 0 ? fmt::format("{:.2f}", p.baselineUs / p.medianUs) : "-";
      std::string min = p.status == TunePoint::Status::Reused ? "(earlier)" : fmt::format("{:.1f}", p.minUs);
      out += fmt::format("{:>4}  {:<64} {:>11.1f} {:>11} {:>13} {:>9}\n", i + 1, p.text, p.medianUs, min, vsHeuristic,
                         vsBase);
    }
    out += fmt::format("      pruned {}, failed {}, outputs differ {}, untimed {}\n", counts[TunePoint::Status::Pruned],
                       counts[TunePoint::Status::Failed], counts[TunePoint::Status::Mismatch],
                       counts[TunePoint::Status::Untimed]);
  }
  return out;
}

std::string sweepCsv(const TuneResult &result) {
  std::string csv = "tokens,bucket,config,vector,threads,rows,unroll,off,on,buffers,chunk,family,status,median_us,min_us,"
                    "baseline_us,fraction_of_baseline,is_heuristic,is_best,why\n";
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
                                          const std::string &baselineName, std::string &note) {
  std::vector<std::string> written;
  writeFile(stem + ".csv", sweepCsv(result));
  written.push_back(stem + ".csv");
  auto groups = byTokens(result);
  if (groups.empty())
    return written;
  const auto &[tokens, points] = *groups.rbegin();
  // One data block per family (gnuplot's `index`), its title on the block's first line. Throughput, not
  // a fraction of the copy: configs reused from an earlier sweep have no copy timed with them.
  auto gbps = [](const TunePoint &p) { return p.bytesMoved / p.medianUs / 1e3; };
  std::map<std::string, std::vector<const TunePoint *>> families;
  std::vector<double> copies;
  for (const TunePoint *p : points) {
    if (ranks(*p) && p->medianUs > 0 && !(p->config == Schedule{}))
      families[tune::familyOf(p->config)].push_back(p);
    if (p->baselineUs > 0)
      copies.push_back(p->baselineUs);
  }
  std::string dat;
  for (auto &[family, members] : families) {
    std::sort(members.begin(), members.end(),
              [](const TunePoint *a, const TunePoint *b) { return tune::plotAxisOf(a->config) < tune::plotAxisOf(b->config); });
    dat += dsl::quote(family) + "\n";
    for (const TunePoint *p : members)
      dat += fmt::format("{} {:.4f}\n", tune::plotAxisOf(p->config), gbps(*p));
    dat += "\n\n";
  }
  const TunePoint *heuristic = heuristicOf(points), *best = fastest(points);
  writeFile(stem + ".dat", dat);
  written.push_back(stem + ".dat");
  // Ascend configs lie along their chunk, the others along their vector width.
  bool byChunk = !families.empty() && families.begin()->second.front()->config.buffers != 0;
  std::string gp = fmt::format("set terminal svg size 1200,650 dynamic noenhanced font 'sans,11'\nset output {}\n"
                               "set title {}\nset xlabel {}\n"
                               "set ylabel 'GB/s (minimum bytes of the op / median time)'\nset logscale x 2\n"
                               "{}\nset key outside right top font ',8'\nset grid\n"
                               "set offsets graph 0.05, graph 0.05, graph 0.08, 0\n",
                               dsl::quote(stem + ".svg"), dsl::quote(fmt::format("{} ({} tokens)", title, tokens)),
                               byChunk ? "'chunk (elements of a row per UB pass)'" : "'vector width (elements)'",
                               byChunk ? "set xtics (256, 1024, 4096, 16384)" : "set xtics (1, 2, 4, 8, 16)");
  auto hline = [&](double y, const std::string &label, const char *style) {
    gp += fmt::format("set arrow from graph 0, first {0:.4f} to graph 1, first {0:.4f} nohead {1}\n"
                      "set label {2} at graph 0.01, first {0:.4f} offset 0,0.6\n",
                      y, style, dsl::quote(label));
  };
  // The y range holds the lines too (gnuplot's autoscale sees only the data).
  double top = 0;
  for (const auto &[family, members] : families)
    for (const TunePoint *p : members)
      top = std::max(top, gbps(*p));
  if (!copies.empty()) {
    std::sort(copies.begin(), copies.end());
    double copy = points.front()->bytesMoved / copies[copies.size() / 2] / 1e3;
    hline(copy, fmt::format("{} {:.1f} GB/s", baselineName, copy), "dt 3 lw 2 lc rgb 'gray40'");
    top = std::max(top, copy);
  }
  if (heuristic && ranks(*heuristic))
    top = std::max(top, gbps(*heuristic));
  gp += top > 0 ? fmt::format("set yrange [0:{:.4f}]\n", 1.12 * top) : "set yrange [0:*]\n";
  if (heuristic && ranks(*heuristic))
    hline(gbps(*heuristic), fmt::format("heuristic {:.1f} GB/s", gbps(*heuristic)), "dt 2 lw 2 lc rgb 'black'");
  if (best && !(best->config == Schedule{}))
    gp += fmt::format("set label {} at first {}, first {:.4f} point pt 7 ps 2 lc rgb 'red' right offset -1,-1\n",
                      dsl::quote("best: " + best->text), tune::plotAxisOf(best->config), gbps(*best));
  if (families.empty())
    gp += "plot 1/0 notitle\n";
  else
    gp += fmt::format("plot for [i=0:{}] {} index i using 1:2 with linespoints title columnheader(1)\n",
                      families.size() - 1, dsl::quote(stem + ".dat"));
  writeFile(stem + ".gp", gp);
  written.push_back(stem + ".gp");
  note = runGnuplot(stem + ".gp");
  if (note.empty())
    written.push_back(stem + ".svg");
  return written;
}

} // namespace moec::cli
