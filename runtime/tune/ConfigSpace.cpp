//===- ConfigSpace.cpp - Config text and each target's space --------------===//
#include "moec/tune/ConfigSpace.h"

#include <algorithm>
#include <charconv>
#include <map>

namespace moec::tune {

namespace {

/// "a+b": the names of the optimizations in `bits`.
std::string optimizationsText(uint32_t bits) {
  std::string text;
  for (const auto &[name, bit] : kOptimizationsByName)
    if (bits & bit)
      text += (text.empty() ? "" : "+") + std::string(name);
  return text;
}

int64_t parseCount(const std::string &field, const std::string &value) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || v < 0)
    throw std::invalid_argument("'" + field + "': '" + value + "' is not a whole number");
  return v;
}

/// The optimizations "a+b" names ("none": no one) for the config field `field` ("off", "on"), each in
/// `allowed`.
uint32_t parseOptimizations(const std::string &field, const std::string &value, uint32_t allowed) {
  uint32_t bits = 0;
  if (value == "none")
    return 0;
  size_t start = 0;
  while (start <= value.size()) {
    size_t plus = value.find('+', start);
    std::string name = value.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    uint32_t bit = optimizationByName(name);
    if (!(bit & allowed))
      throw std::invalid_argument("'" + field + "': " + (bit ? "'" + name + "' is not an opt-in optimization" : "unknown optimization '" + name + "'") +
                                  " (known: " + optimizationNames(allowed) + ")");
    bits |= bit;
    if (plus == std::string::npos)
      break;
    start = plus + 1;
  }
  return bits;
}

// The spaces. CPU: `rows` is the least rows a worker takes at once (small batches stay on fewer threads);
// `off` may turn streaming (non-temporal) stores off, the software prefetch of gathered rows, or both.
// GPU: threads along the row, rows per block, and whether the kernels keep within 128 registers
// (register-budget: twice the warps per SM, A3's dot products in smaller batches).
const std::vector<Knob> kCpuKnobs = {
    {"off", {0, kStreamingStores, kPrefetchGatheredRows, kStreamingStores | kPrefetchGatheredRows}},
    {"rows", {1, 16, 128}},
    {"unroll", {1, 4, 8}},
    {"vector", {4, 8, 16, 32}}};
const std::vector<Knob> kGpuKnobs = {{"on", {0, kRegisterBudget}},
                                     {"threads", {32, 64, 128, 256, 512}},
                                     {"rows", {1, 2, 4, 8}},
                                     {"unroll", {1, 4, 8}},
                                     {"vector", {1, 2, 4, 8}}};
// Ascend: the UB plan's knobs; the vector code inside a pass is the compiler's. `rows`: the most rows
// that share a UB pass, `chunk`: the most elements of a row per pass, `buffers`: single or double.
const std::vector<Knob> kAscendKnobs = {
    {"buffers", {1, 2}}, {"rows", {1, 8, 64, 512}}, {"chunk", {256, 512, 1024, 2048, 4096, 8192, 16384}}};

/// An Ascend config: its vector code the compiler's, its UB plan the config's.
bool isAscendConfig(const Schedule &s) { return s.buffers != 0 && !s.vector && !s.threads && !s.unroll; }

void setKnob(Schedule &s, const std::string &name, int64_t value) {
  if (name == "vector")
    s.vector = value;
  else if (name == "threads")
    s.threads = value;
  else if (name == "rows")
    s.rowsPerBlock = value;
  else if (name == "unroll")
    s.unroll = value;
  else if (name == "off")
    s.disabled = uint32_t(value);
  else if (name == "on")
    s.enabled = uint32_t(value);
  else if (name == "buffers")
    s.buffers = value;
  else if (name == "chunk")
    s.chunk = value;
  else
    throw std::invalid_argument("unknown field '" + name +
                                "' (known: vector, threads, rows, unroll, off, on; on ascend buffers, chunk)");
}

/// Ascend: the compiler's rules (0: its choice), then what the row and the chip rule out. The UB check is
/// a floor: the streamed element alone, in every copy, must fit; moe-plan-ascend caps a chunk that fits
/// only without the other buffers.
std::string ascendPrunedBecause(const Schedule &s, const ShapeFacts &facts) {
  if (std::string why = scheduleProblem(s, TargetKind::Ascend, /*requested=*/true); !why.empty())
    return why;
  // The chunk is a cap: every cap that holds the whole row gives one plan, kept once, as the space's least.
  if (facts.inner > 0 && s.chunk > facts.inner) {
    const std::vector<int64_t> &caps = kAscendKnobs.back().values;
    auto holds = std::lower_bound(caps.begin(), caps.end(), facts.inner);
    int64_t least = holds == caps.end() ? caps.back() : *holds;
    if (s.chunk > least)
      return "'chunk': " + std::to_string(s.chunk) + " holds the whole row (" + std::to_string(facts.inner) +
             "), as chunk=" + std::to_string(least) + " does";
  }
  int64_t chunkBytes = s.chunk * facts.elemBytes;
  if (facts.maxCopyBytes > 0 && chunkBytes > facts.maxCopyBytes)
    return "'chunk': " + std::to_string(s.chunk) + " elements of " + std::to_string(facts.elemBytes) +
           " bytes exceed one DataCopy's " + std::to_string(facts.maxCopyBytes) + " bytes";
  if (facts.ubBytes > 0 && chunkBytes * std::max<int64_t>(s.buffers, 1) > facts.ubBytes)
    return "'chunk': " + std::to_string(s.buffers) + " buffers of " + std::to_string(s.chunk) + " elements exceed the " +
           std::to_string(facts.ubBytes) + "-byte UB";
  if (s.rowsPerBlock > 1 && facts.inner > 0 && s.chunk > 0 && s.chunk < facts.inner)
    return "'rows': rows share a UB pass only when a row is one chunk, and " + std::to_string(facts.inner) +
           " elements take " + std::to_string((facts.inner + s.chunk - 1) / s.chunk);
  return "";
}

} // namespace

std::string configText(const Schedule &s) {
  if (s == Schedule{})
    return "heuristic";
  std::string text;
  if (isAscendConfig(s))
    text = "buffers=" + std::to_string(s.buffers) + ",chunk=" + std::to_string(s.chunk) +
           ",rows=" + std::to_string(s.rowsPerBlock);
  else
    text = "vector=" + std::to_string(s.vector) + ",threads=" + std::to_string(s.threads) +
           ",rows=" + std::to_string(s.rowsPerBlock) + ",unroll=" + std::to_string(s.unroll) +
           (s.buffers || s.chunk ? ",buffers=" + std::to_string(s.buffers) + ",chunk=" + std::to_string(s.chunk) : "");
  if (s.disabled)
    text += ",off=" + optimizationsText(s.disabled);
  if (s.enabled)
    text += ",on=" + optimizationsText(s.enabled);
  return text;
}

Schedule parseConfig(const std::string &text) {
  Schedule s;
  if (text == "heuristic")
    return s;
  std::map<std::string, bool> seen;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("'" + item + "' is not NAME=VALUE");
    std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    if (seen[name])
      throw std::invalid_argument("field '" + name + "' is given twice");
    seen[name] = true;
    if (name == "off")
      s.disabled = parseOptimizations(name, value, kAllOptimizations);
    else if (name == "on")
      s.enabled = parseOptimizations(name, value, kOptInOptimizations);
    else
      setKnob(s, name, parseCount(name, value));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
    if (start == text.size())
      throw std::invalid_argument("a config ends with ','");
  }
  return s;
}

const std::vector<Knob> &knobsOf(TargetKind target) {
  return target == TargetKind::GPU ? kGpuKnobs : target == TargetKind::Ascend ? kAscendKnobs : kCpuKnobs;
}

std::vector<Schedule> configSpace(TargetKind target) {
  const std::vector<Knob> &knobs = knobsOf(target);
  std::vector<Schedule> configs{Schedule{}};
  for (const Knob &knob : knobs) {
    std::vector<Schedule> next;
    for (const Schedule &partial : configs)
      for (int64_t value : knob.values) {
        Schedule s = partial;
        setKnob(s, knob.name, value);
        next.push_back(s);
      }
    configs = std::move(next);
  }
  if (target == TargetKind::CPU)
    for (Schedule &s : configs)
      s.threads = 1; // a CPU kernel runs a row per call; the worker count is the pool's
  return configs;
}

std::string prunedBecause(const Schedule &s, TargetKind target, const ShapeFacts &facts) {
  if (target == TargetKind::Ascend)
    return ascendPrunedBecause(s, facts);
  if (std::string why = scheduleProblem(s, target); !why.empty())
    return why;
  if (facts.inner > 0 && s.vector > 1 && s.vector > facts.inner)
    return "'vector': " + std::to_string(s.vector) + " is wider than the row (" + std::to_string(facts.inner) + ")";
  if (target == TargetKind::GPU) {
    if (s.vector * facts.elemBytes > 16)
      return "'vector': " + std::to_string(s.vector) + " elements of " + std::to_string(facts.elemBytes) +
             " bytes exceed a 16-byte access";
    if (facts.inner > 0 && facts.inner % s.vector != 0)
      return "'vector': " + std::to_string(s.vector) + " does not divide the row (" + std::to_string(facts.inner) +
             "), so rows would start unaligned";
    // f32 accumulators live in registers: unroll x vector of them per thread, of 255.
    if (s.unroll * s.vector > 64)
      return "unroll x vector = " + std::to_string(s.unroll * s.vector) + " accumulators exceed 64 registers";
  } else if (s.vector * facts.elemBytes > 64) {
    return "'vector': " + std::to_string(s.vector) + " elements of " + std::to_string(facts.elemBytes) +
           " bytes exceed one 64-byte register";
  }
  return "";
}

std::string familyOf(const Schedule &s) {
  if (isAscendConfig(s)) // a line per buffering and rows per pass, over the chunk
    return "buffers=" + std::to_string(s.buffers) + ",rows=" + std::to_string(s.rowsPerBlock);
  std::string text = configText(s);
  return text.substr(text.find(',') + 1); // configText starts with vector=
}

int64_t plotAxisOf(const Schedule &s) { return isAscendConfig(s) ? s.chunk : s.vector; }

} // namespace moec::tune
