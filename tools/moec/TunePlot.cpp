//===- TunePlot.cpp - The picture of a sweep ----------------------------------===//
#include "TunePlot.h"

#include "moec/tune/TuningDb.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

namespace moec::cli {

namespace {

// Sizes in pixels; a character of the 10-point font is taken as kCharPx wide, a little more than it is.
constexpr int kWidth = 1400, kTitlePx = 56, kKeyPx = 40, kAxisPx = 70, kPanelPx = 290, kCharPx = 8;
constexpr size_t kWrap = 46; // a ranking label's longest line, in characters
constexpr const char *kBestColour = "0xe04040", *kHeuristicColour = "0x505050", *kOtherColour = "0x6a9fd0";
constexpr const char *kHeuristicLine = "dt 2 lw 1.5 lc rgb 'black'", *kBaselineLine = "dt 3 lw 2 lc rgb 'gray30'";

bool ranks(const TunePoint &p) {
  return (p.status == TunePoint::Status::Timed || p.status == TunePoint::Status::Reused) && p.medianUs > 0;
}

/// A string in a gnuplot script: single quotes, a quote doubled.
std::string scriptQuote(const std::string &s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

/// A string in a gnuplot data file: double quotes, a line break as \n (which gnuplot draws as one); a
/// quote or a backslash (no config has one) becomes a plain character.
std::string dataQuote(const std::string &s) {
  std::string q = "\"";
  for (char c : s)
    q += c == '\n' ? std::string("\\n") : std::string(1, c == '"' ? '\'' : c == '\\' ? '/' : c);
  return q + "\"";
}

/// `text` in lines of at most about `width` characters, broken after a comma or before a '+'.
std::vector<std::string> wrapped(std::string text, size_t width) {
  std::vector<std::string> lines;
  while (text.size() > width) {
    size_t cut = text.find_last_of(",+", width);
    if (cut == std::string::npos || cut == 0)
      cut = width;
    else if (text[cut] == ',')
      ++cut;
    lines.push_back(text.substr(0, cut));
    text.erase(0, cut);
  }
  lines.push_back(text);
  return lines;
}

std::string joined(const std::vector<std::string> &lines) {
  std::string s;
  for (const std::string &line : lines)
    s += (s.empty() ? "" : "\n") + line;
  return s;
}

size_t longest(const std::vector<std::string> &lines) {
  size_t n = 0;
  for (const std::string &line : lines)
    n = std::max(n, line.size());
  return n;
}

/// A config's knobs as its text names them, in its order: "vector=8,threads=1,off=a+b" -> vector: 8,
/// threads: 1, off: a+b.
std::vector<std::pair<std::string, std::string>> knobValues(const std::string &text) {
  std::vector<std::pair<std::string, std::string>> knobs;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start), end = comma == std::string::npos ? text.size() : comma;
    std::string item = text.substr(start, end - start);
    if (size_t eq = item.find('='); eq != std::string::npos)
      knobs.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    start = end + 1;
  }
  return knobs;
}

/// The value of `knob` in `knobs`; "none" where the text has no such field (an optimization set left empty).
std::string valueOf(const std::vector<std::pair<std::string, std::string>> &knobs, const std::string &knob) {
  for (const auto &[name, value] : knobs)
    if (name == knob)
      return value;
  return "none";
}

/// The order of a knob's values along its panel: numbers by size; optimization sets ("none" when a
/// config's text has no such field) by how many they name, then by name.
bool valueBefore(const std::string &a, const std::string &b) {
  auto number = [](const std::string &s) {
    return !s.empty() && s.size() < 18 && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(uint8_t(c)); });
  };
  if (number(a) && number(b))
    return std::stoll(a) < std::stoll(b);
  auto names = [](const std::string &s) { return s == "none" ? 0 : 1 + std::count(s.begin(), s.end(), '+'); };
  return names(a) != names(b) ? names(a) < names(b) : a < b;
}

struct ValueOrder {
  bool operator()(const std::string &a, const std::string &b) const { return valueBefore(a, b); }
};

/// What a panel's x axis says about a knob.
std::string knobMeaning(const std::string &knob, TargetKind kind) {
  static const std::map<std::string, std::string> meanings = {
      {"vector", "vector width (elements)"},
      {"threads", "threads along a row"},
      {"off", "optimizations turned off"},
      {"on", "opt-in optimizations turned on"},
      {"buffers", "buffers (1: single, 2: double-buffered)"},
      {"chunk", "chunk (elements of a row per UB pass)"}};
  if (knob == "rows")
    return kind == TargetKind::Ascend ? "rows sharing a UB pass"
           : kind == TargetKind::GPU  ? "rows per block"
                                      : "rows (the least a worker takes at once)";
  if (knob == "unroll")
    return kind == TargetKind::CPU ? "unroll (of a reduction)" : "unroll";
  auto it = meanings.find(knob);
  return it == meanings.end() ? knob : it->second;
}

} // namespace

SweepPlot sweepPlot(const std::vector<const TunePoint *> &points, const std::string &stem, const std::string &dataPath,
                    const std::string &title, const std::string &baselineName, TargetKind kind, size_t top) {
  std::vector<const TunePoint *> ranked;
  bool reused = false;
  for (const TunePoint *p : points)
    if (ranks(*p)) {
      ranked.push_back(p);
      reused = reused || p->status == TunePoint::Status::Reused;
    }
  std::sort(ranked.begin(), ranked.end(), [](const TunePoint *a, const TunePoint *b) {
    return tune::ranksBefore(a->text, a->medianUs, b->text, b->medianUs);
  });
  const TunePoint *best = ranked.empty() ? nullptr : ranked.front(), *heuristic = nullptr;
  for (const TunePoint *p : ranked)
    if (p->config == Schedule{})
      heuristic = p;
  std::vector<double> copies;
  for (const TunePoint *p : points)
    if (p->baselineUs > 0)
      copies.push_back(p->baselineUs);
  std::sort(copies.begin(), copies.end());
  double copyUs = copies.empty() ? 0 : copies[copies.size() / 2];

  // The ranking: the first `top` and the heuristic wherever it ranks, best at the top.
  std::vector<size_t> shown;
  for (size_t i = 0; i < ranked.size(); ++i)
    if (i < std::max<size_t>(top, 1) || ranked[i] == heuristic)
      shown.push_back(i);
  std::string data = fmt::format("{} data: {} ({} tokens)\n# the ranking: y, median us, colour, label, note\n",
                                 kPlotMarker, title, points.empty() ? 0 : points.front()->tokens);
  size_t labelChars = 0, labelLines = 1, noteChars = 0;
  double slowest = std::max(copyUs, heuristic ? heuristic->medianUs : 0);
  for (size_t k = 0; k < shown.size(); ++k) {
    const TunePoint &p = *ranked[shown[k]];
    std::vector<std::string> label = wrapped(fmt::format("#{} {}", shown[k] + 1, p.text), kWrap);
    labelChars = std::max(labelChars, longest(label));
    labelLines = std::max(labelLines, label.size());
    std::string note = fmt::format("{:.1f} us{}", p.medianUs, p.status == TunePoint::Status::Reused ? " (earlier)" : "");
    if (&p == best && heuristic && heuristic != best)
      note += fmt::format(", {:.2f}x the heuristic", heuristic->medianUs / p.medianUs);
    if (&p == best && copyUs > 0)
      note += fmt::format(", {:.2f} of {}", copyUs / p.medianUs, baselineName);
    noteChars = std::max(noteChars, note.size());
    slowest = std::max(slowest, p.medianUs);
    const char *colour = &p == best ? kBestColour : &p == heuristic ? kHeuristicColour : kOtherColour;
    data += fmt::format("{} {:.4f} {} {} {}\n", shown.size() - k, p.medianUs, colour, dataQuote(joined(label)),
                        dataQuote(note));
  }

  // The panels: each knob the ranked configs vary, its best time at each value.
  std::vector<std::string> knobs; // in the order config texts name them
  std::map<std::string, std::map<std::string, double, ValueOrder>> bestAt;
  for (const TunePoint *p : ranked) {
    if (p->config == Schedule{})
      continue;
    for (const auto &[knob, value] : knobValues(p->text))
      if (std::find(knobs.begin(), knobs.end(), knob) == knobs.end())
        knobs.push_back(knob);
  }
  for (const TunePoint *p : ranked) {
    if (p->config == Schedule{})
      continue;
    auto values = knobValues(p->text);
    for (const std::string &knob : knobs) {
      std::string value = valueOf(values, knob);
      auto [slot, first] = bestAt[knob].try_emplace(value, p->medianUs);
      if (!first)
        slot->second = std::min(slot->second, p->medianUs);
    }
  }
  std::vector<std::string> panels;
  for (const std::string &knob : knobs)
    if (bestAt[knob].size() > 1)
      panels.push_back(knob);
  auto bestValues = best ? knobValues(best->text) : std::vector<std::pair<std::string, std::string>>{};
  size_t tickLines = 1;
  std::map<std::string, double> panelTop; // each panel's y axis holds its bars and the two lines
  for (const std::string &knob : panels) {
    data += fmt::format("\n\n# {}: x, best median us, colour, value, note\n", knob);
    size_t x = 0;
    for (const auto &[value, us] : bestAt[knob]) {
      std::string tick = value;
      std::replace(tick.begin(), tick.end(), '+', '\n');
      tickLines = std::max<size_t>(tickLines, 1 + std::count(value.begin(), value.end(), '+'));
      data += fmt::format("{} {:.4f} {} {} {}\n", x++, us, value == valueOf(bestValues, knob) ? kBestColour : kOtherColour,
                          dataQuote(tick), dataQuote(fmt::format("{:.1f}", us)));
      double &top = panelTop.try_emplace(knob, std::max(copyUs, heuristic ? heuristic->medianUs : 0)).first->second;
      top = std::max(top, us);
    }
  }

  // The layout, in pixels, then as fractions of the picture.
  int rowPx = std::max(30, 14 * int(labelLines) + 6);
  int rankPx = kKeyPx + kAxisPx + rowPx * int(shown.size());
  int panelRows = int(panels.size() + 1) / 2, panelPx = kPanelPx + 14 * int(tickLines - 1);
  int height = kTitlePx + rankPx + panelRows * panelPx;
  double lmargin = double(labelChars) + 3, rmargin = 3;
  // The bars' axis ends where the longest note still fits after the slowest bar.
  double plotPx = kWidth - (lmargin + rmargin) * kCharPx, notePx = double(noteChars) * 7 + 16;
  double xmax = slowest / std::max(0.3, 1 - notePx / plotPx);

  std::string dat = scriptQuote(dataPath);
  std::string gp = fmt::format(
      "{0} script: {1}\n"
      "# gnuplot {2}.gp writes {2}.svg; gnuplot -e \"format='png'\" {2}.gp writes {2}.png, both beside it\n"
      "if (!exists(\"format\")) format = 'svg'\n"
      "if (format eq 'png') {{\n"
      "  set terminal pngcairo size {3},{4} noenhanced font 'sans,10' background '#ffffff'\n"
      "}} else {{\n"
      "  set terminal svg size {3},{4} dynamic noenhanced font 'sans,10' background '#ffffff'\n"
      "}}\n"
      "set output {5}.format\n"
      "set multiplot title {6}\n"
      "set style fill solid 1 noborder\n"
      "set style textbox opaque noborder margins 1,1\n",
      kPlotMarker, title, std::filesystem::path(stem).filename().string(), kWidth, height, scriptQuote(stem + "."),
      fmt::format("{}.\"\\n\".{}", scriptQuote(fmt::format("{}, {} tokens", title, points.empty() ? 0 : points.front()->tokens)),
                  scriptQuote(fmt::format("{} of {} configs timed, ranked by median time (shorter is faster){}",
                                          ranked.size(), points.size(),
                                          reused ? "; (earlier): timed by an earlier sweep" : ""))));
  double panelsFrac = double(panelRows * panelPx) / height;
  gp += fmt::format("# the ranking\n"
                    "set origin 0, {:.5f}\nset size 1, {:.5f}\n"
                    "set lmargin {:.0f}\nset rmargin {:.0f}\nset tmargin 3\nset bmargin 3.5\n"
                    "set xlabel 'median time (us)'\nset xrange [0:{:.4f}]\nset yrange [0.4:{:.1f}]\n"
                    "set ytics scale 0 font ',9'\nset grid xtics lc rgb '#dddddd'\n"
                    "set key top center outside horizontal samplen 3 font ',9'\n",
                    panelsFrac, double(rankPx) / height, lmargin, rmargin, xmax, double(shown.size()) + 0.6);
  std::string keys = fmt::format(", \\\n  NaN with boxes lc rgb '{}' title {}", kBestColour,
                                 scriptQuote(best ? fmt::format("best {:.1f} us", best->medianUs) : "best"));
  auto line = [&](int id, bool vertical, double us, const char *style, const std::string &name) {
    gp += vertical ? fmt::format("set arrow {} from first {:.4f}, graph 0 to first {:.4f}, graph 1 nohead {} back\n",
                                 id, us, us, style)
                   : fmt::format("set arrow {} from graph 0, first {:.4f} to graph 1, first {:.4f} nohead {} back\n",
                                 id, us, us, style);
    if (vertical)
      keys += fmt::format(", \\\n  NaN with lines {} title {}", style, scriptQuote(name));
  };
  if (heuristic)
    line(1, true, heuristic->medianUs, kHeuristicLine, fmt::format("heuristic {:.1f} us", heuristic->medianUs));
  if (copyUs > 0)
    line(2, true, copyUs, kBaselineLine, fmt::format("{} {:.1f} us", baselineName, copyUs));
  gp += fmt::format("plot {0} index 0 using (0):1:(0):2:($1-0.38):($1+0.38):3:ytic(4) with boxxyerror lc rgb variable "
                    "notitle, \\\n  {0} index 0 using 2:1:5 with labels boxed left offset 0.8,0 font ',9' notitle{1}\n",
                    dat, keys);

  gp += "# one panel per knob: its best time at each value\n"
        "unset arrow\nunset key\nunset grid\nset grid ytics lc rgb '#dddddd'\nset ytics auto scale default font ',9'\n"
        "set xtics scale 0 font ',9'\nset ylabel 'best median time (us)'\n";
  for (size_t j = 0; j < panels.size(); ++j) {
    bool alone = panels.size() == 1;
    int row = int(j / 2), column = int(j % 2);
    gp += fmt::format("set origin {:.5f}, {:.5f}\nset size {:.5f}, {:.5f}\n"
                      "set lmargin 11\nset rmargin 4\nset tmargin 1.5\nset bmargin {:.1f}\n"
                      "set xlabel {}\nset xrange [-0.6:{:.1f}]\nset yrange [0:{:.4f}]\n",
                      alone ? 0.0 : 0.5 * column, double((panelRows - 1 - row) * panelPx) / height, alone ? 1.0 : 0.5,
                      double(panelPx) / height, double(tickLines) + 2.5, scriptQuote(knobMeaning(panels[j], kind)),
                      double(bestAt[panels[j]].size()) - 0.4, 1.2 * panelTop[panels[j]]);
    if (heuristic)
      line(1, false, heuristic->medianUs, kHeuristicLine, "");
    if (copyUs > 0)
      line(2, false, copyUs, kBaselineLine, "");
    gp += fmt::format("plot {0} index {1} using 1:2:(0.6):3:xtic(4) with boxes lc rgb variable notitle, \\\n"
                      "  {0} index {1} using 1:2:5 with labels boxed offset 0,0.8 font ',9' notitle\n",
                      dat, j + 1);
  }
  gp += "unset multiplot\n";
  return {data, gp};
}

} // namespace moec::cli
