//===- TuneCommand.cpp - moec tune -----------------------------------------===//
//
//   moec tune OP --target cpu|ptx|ascend [--chip C] --dtype D --dim H=.. --attr k=.. [--with T]
//             [--tokens 256,4096] [--budget S] [--configs FILE] [--reps N] [--shard i/n] [--out FILE]
//   moec tune --list                 the tuning files in the cache
//   moec tune --merge A.json B.json [--out FILE]   shards merged (into the cache without --out)
//
// A sweep runs the configs of the target's space (or a file's) on the inputs `moec bench` uses (bench/gpu/
// Cases.h), through the Tuner (moec/jit/Tuner.h), then prints a ranked table, writes the tuning file the
// Runtime reads, and a CSV and a gnuplot plot of the sweep. On Ascend the tiled kernels of every config
// run on the UB simulator (the bit-for-bit check) and the plans' cost on the chip ranks them.
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "Common.h"
#include "TuneReport.h"

#include "moec/jit/TuneCalls.h"

#include "moec/contracts/Files.h"
#include "moec/jit/Autotuning.h"
#include "moec/jit/Tuner.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/DiskCache.h"
#include "moec/runtime/ThreadPool.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cstring>
#include <random>
#include <set>
#include <unistd.h>

namespace moec::cli {

namespace {

struct TuneOptionsCli {
  std::string op;
  std::string dtype = "f32", target = "cpu", arch = "sm_90";
  ChipOptions chip;
  std::vector<std::string> dims, attrs, with;
  std::vector<int64_t> tokens;
  double budget = 0;
  std::string configsFile, shard, out, reportDir;
  int reps = 10;
  unsigned compileThreads = 0;
  size_t top = 10;
  bool list = false;
  std::vector<std::string> merge;
};

/// The --configs file: one config per line; blank lines and '#' comments skipped. Errors name the line.
std::vector<Schedule> readConfigs(const std::string &path) {
  std::string text = readRegularFile(path);
  std::vector<Schedule> configs;
  size_t start = 0;
  for (int line = 1; start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    item = item.substr(0, item.find('#'));
    item.erase(0, item.find_first_not_of(" \t\r"));
    item.erase(item.find_last_not_of(" \t\r") + 1);
    if (item.empty())
      continue;
    try {
      configs.push_back(tune::parseConfig(item));
    } catch (const std::invalid_argument &e) {
      throw CLI::ValidationError("--configs", fmt::format("{}:{}: {}", path, line, e.what()));
    }
  }
  return configs;
}

/// --shard i/n: the configs whose index in the sweep is i modulo n.
std::vector<Schedule> shardOf(const std::vector<Schedule> &configs, const std::string &shard) {
  unsigned i = 0, n = 0;
  char slash = 0, extra = 0;
  if (std::sscanf(shard.c_str(), "%u%c%u%c", &i, &slash, &n, &extra) != 3 || slash != '/' || n == 0 || i >= n)
    throw CLI::ValidationError("--shard", "'" + shard + "' is not i/n with 0 <= i < n");
  std::vector<Schedule> mine;
  for (size_t k = 0; k < configs.size(); ++k)
    if (k % n == i)
      mine.push_back(configs[k]);
  return mine;
}

void listTuned(const tune::TuningDb &db) {
  std::vector<tune::TuningFile> files = db.list();
  fmt::print("{} tuning files in {}\n", files.size(), db.dir().string());
  for (const tune::TuningFile &f : files) {
    std::string statics;
    for (const auto &[name, value] : f.key.statics)
      statics += (statics.empty() ? "" : ",") + name + "=" + std::to_string(value);
    fmt::print("{} {} {} {}{}\n", f.key.op, f.key.dtype, f.key.target, statics,
               f.key.present.empty() ? "" : " +" + fmt::format("{}", fmt::join(f.key.present, ",+")));
    for (const auto &[bucket, r] : f.buckets)
      fmt::print("  tokens <= {:>7}: {:<48} {:>10.1f} us  ({} configs timed)\n", bucket, r.best, r.us,
                 r.timings.size());
  }
}

/// Writes a tuning file to a path the user named (--out), making its folder first.
void writeTuningFile(const std::string &path, const tune::TuningFile &file) {
  std::filesystem::path target(path);
  if (target.has_parent_path())
    std::filesystem::create_directories(target.parent_path());
  tune::TuningDb::write(target, file);
}

void mergeFiles(const TuneOptionsCli &o, tune::TuningDb &db) {
  std::vector<tune::TuningFile> files;
  for (const std::string &path : o.merge)
    files.push_back(tune::TuningDb::read(path));
  tune::TuningFile merged = tune::merge(files);
  if (!o.out.empty()) {
    writeTuningFile(o.out, merged);
    fmt::print("merged {} files into {}\n", files.size(), o.out);
  } else {
    db.store(merged);
    fmt::print("merged {} files into {}\n", files.size(), (db.dir() / merged.key.fileName()).string());
  }
}

void runSweep(const TuneOptionsCli &o, tune::TuningDb &db) {
  if (o.target != "cpu" && o.target != "ptx" && o.target != "ascend")
    throw CLI::ValidationError("--target", "moec tune times on cpu, ptx (a GPU) or ascend (the chip's cost model); got '" +
                                               o.target + "'");
  std::unique_ptr<dsl::OpDef> op = loadOp(o.op);
  KernelRequest request;
  request.dtype = parseDType(o.dtype);
  request.dims = parseAssignments(o.dims, "--dim");
  request.attrs = parseAssignments(o.attrs, "--attr");
  request.with = presentTensors(*op, o.with);
  std::map<std::string, int64_t> statics = request.dims;
  statics.insert(request.attrs.begin(), request.attrs.end());

  Runtime::Options options;
  options.autotune = false; // the heuristic is the compiler's, not an earlier sweep's winner
  const CudaDriver &driver = CudaDriver::instance();
  if (o.target == "ptx") {
    if (!driver.available())
      throw std::runtime_error("moec tune --target ptx needs a GPU, and there is none here: " +
                               driver.unavailableReason());
    options.target = Target::ptx(driver.archName(0));
  } else if (o.target == "ascend") {
    options.target = Target::ascendSimulator(o.chip.load());
  } else {
    options.target = Target::cpu();
  }
  Runtime rt(options);
  std::shared_ptr<CudaContext> context;
  std::optional<CudaContext::Scope> current;
  if (o.target == "ptx") {
    context = std::make_shared<CudaContext>(driver, kCudaDevice);
    current.emplace(driver, context.get());
  }

  std::vector<Schedule> configs = o.configsFile.empty() ? tune::configSpace(rt.target().kind) : readConfigs(o.configsFile);
  if (!o.shard.empty())
    configs = shardOf(configs, o.shard);
  std::vector<int64_t> tokens = o.tokens;
  if (tokens.empty())
    tokens = {gpucheck::productionTokens(statics.count("H") ? statics.at("H") : 0)};
  tune::TuningKey key = tuningKeyOf(o.op, request, rt.target());
  std::optional<tune::TuningFile> previous;
  if (!o.out.empty() && std::filesystem::exists(o.out))
    previous = tune::TuningDb::read(o.out);
  else if (o.out.empty())
    previous = db.load(key);

  TuneOptions tuneOptions;
  tuneOptions.tokens = tokens;
  tuneOptions.configs = configs;
  tuneOptions.reps = o.reps;
  tuneOptions.budgetSeconds = o.budget;
  tuneOptions.compileThreads = o.compileThreads;
  tuneOptions.previous = previous ? &*previous : nullptr;

  std::unique_ptr<AscendPlanner> planner; // before the calls that refer to it, so it outlives them
  if (o.target == "ascend") {
    AscendPlanner::Options plannerOptions;
    plannerOptions.autotune = false; // Schedule{} is the compiler's plan, not an earlier sweep's
    planner = std::make_unique<AscendPlanner>(*rt.target().chip, plannerOptions);
  }
  std::unique_ptr<gpucheck::CpuTuneCall> cpuCall;
  std::unique_ptr<gpucheck::GpuTuneCall> gpuCall;
  std::unique_ptr<gpucheck::AscendTuneCall> ascendCall;
  std::mt19937 rng(12345);
  auto callFor = [&](int64_t t) -> TuneCall & {
    cpuCall.reset();
    gpuCall.reset();
    ascendCall.reset();
    gpucheck::Case c = gpucheck::caseFor(o.op, request.dtype, statics, request.with, t, false, rng, false);
    if (o.target == "ascend") {
      ascendCall = std::make_unique<gpucheck::AscendTuneCall>(std::move(c), *planner, o.op, request.dtype, request.with);
      return ascendCall->call;
    }
    if (o.target == "ptx") {
      gpuCall = std::make_unique<gpucheck::GpuTuneCall>(driver, std::move(c));
      return gpuCall->call;
    }
    cpuCall = std::make_unique<gpucheck::CpuTuneCall>(std::move(c));
    return cpuCall->call;
  };
  bool terminal = isatty(STDERR_FILENO);
  std::set<std::string> distinct{tune::configText(Schedule{})};
  for (const Schedule &s : configs)
    distinct.insert(tune::configText(s));
  std::string source = !o.configsFile.empty() ? "from " + o.configsFile : "of the " + o.target + " space";
  fmt::print("{} {} {} on {}: {} configs (the heuristic and {} {}{}) x {} token {}, {}{}\n", o.op, o.dtype,
             gpucheck::modeName(statics, request.with, false), tuningTargetName(rt.target()), distinct.size(),
             distinct.size() - 1, source, o.shard.empty() ? "" : ", shard " + o.shard, tokens.size(),
             tokens.size() == 1 ? "count" : "counts",
             o.target == "ascend" ? "ranked by the plans' cost on the chip (tiled kernels checked on the UB simulator)"
                                  : fmt::format("{} timed runs each", o.reps),
             o.budget > 0 ? fmt::format(", a budget of {:g} s for the timing (the compiles are not part of it)", o.budget)
                          : "");
  std::fflush(stdout);
  tuneOptions.planned = [&](const TunePlan &plan) {
    fmt::print(stderr, "{} configs: {} pruned, {} to compile (the heuristic included){}\n", plan.considered,
               plan.pruned.size(), plan.toCompile,
               plan.timedEarlier ? fmt::format(", {} timed by an earlier sweep at every token count", plan.timedEarlier)
                                 : "");
    if (terminal && !plan.pruned.empty())
      fmt::print(stderr, "(the CSV of the report says why each was pruned)\n");
    else
      for (const auto &[config, why] : plan.pruned)
        fmt::print(stderr, "pruned {}: {}\n", config, why);
  };
  tuneOptions.compileProgress = [&](const TuneCompileProgress &p) {
    double eta = p.seconds / double(p.done) * double(p.total - p.done);
    if (terminal) {
      fmt::print(stderr, "\r\033[Kcompiling {}/{} ({:.0f} s; ETA {:.0f} s)", p.done, p.total, p.seconds, eta);
      if (p.done == p.total)
        fmt::print(stderr, "\n");
      if (!p.error.empty())
        fmt::print(stderr, "\r\033[K{} did not compile: {}\n", p.config, p.error);
      return;
    }
    fmt::print(stderr, "compiling {}/{}: {}: {}\n", p.done, p.total, p.config,
               p.error.empty() ? "ok" : "failed: " + p.error);
  };
  bool timingStarted = false;
  int64_t untimedTokens = -1; // the token count whose untimed points were said to be so
  auto progress = [&](const TuneProgress &p) {
    if (!timingStarted) {
      timingStarted = true;
      fmt::print(stderr, "timing {} points{}\n", p.total,
                 o.budget > 0 ? fmt::format(" (budget {:g} s)", o.budget) : "");
    }
    std::string best = p.best ? fmt::format("best {} {:.1f} us", p.best->text, p.best->medianUs) : "no result yet";
    if (terminal) {
      fmt::print(stderr, "\r\033[K[{}/{}] T={} {}; ETA {:.0f} s", p.done, p.total, p.last->tokens, best, p.etaSeconds);
      if (p.done == p.total)
        fmt::print(stderr, "\n");
      return;
    }
    const TunePoint &q = *p.last;
    if (q.status == TunePoint::Status::Untimed) { // one line says it: the rest of the token count follows suit
      if (untimedTokens == q.tokens)
        return;
      untimedTokens = q.tokens;
      fmt::print(stderr, "[{}/{}] T={} {}: untimed: {} (so are the points of T={} after it)\n", p.done, p.total, q.tokens,
                 q.text, q.why, q.tokens);
      return;
    }
    std::string what = q.status == TunePoint::Status::Timed || q.status == TunePoint::Status::Reused
                           ? fmt::format("{:.1f} us{}", q.medianUs, q.status == TunePoint::Status::Reused ? " (earlier sweep)" : "")
                           : std::string(statusName(q.status)) + ": " + q.why;
    fmt::print(stderr, "[{}/{}] T={} {}: {}\n", p.done, p.total, q.tokens, q.text, what);
  };
  TuneResult result = tuneOp(rt, o.op, request, tuneOptions, callFor, progress);

  std::string baseline = o.target == "ptx" ? "copy" : o.target == "ascend" ? "GM bound" : "memcpy";
  fmt::print("{}", rankedTable(result, baseline, o.top));
  fmt::print("{}", sweepSummary(result, o.budget));
  size_t mismatches = 0, ranked = 0;
  for (const TunePoint &p : result.points) {
    mismatches += p.status == TunePoint::Status::Mismatch;
    ranked += p.status == TunePoint::Status::Timed || p.status == TunePoint::Status::Reused;
  }
  std::string mismatchError = fmt::format("{} configs gave outputs that differ from the heuristic's: a compiler bug "
                                          "(see the lines marked 'mismatch')",
                                          mismatches);
  if (!ranked) { // no tuning file, no report: nothing to put in them
    if (mismatches)
      throw std::runtime_error(mismatchError);
    throw std::runtime_error(
        result.budgetSpent
            ? fmt::format("nothing was timed: the budget of {:g} s was spent before the first group of configs "
                          "(the reference runs and the checks took {:.2f} s); raise --budget, or leave it out",
                          o.budget, result.timingSeconds)
            : "nothing was timed: no config compiled and passed the check (see the lines above)");
  }
  std::string where;
  if (!o.out.empty()) {
    writeTuningFile(o.out, result.file);
    where = o.out;
  } else {
    db.store(result.file);
    where = (db.dir() / key.fileName()).string();
  }
  fmt::print("tuning file: {}\n", where);
  std::filesystem::path reports = o.reportDir.empty() ? db.dir() / "reports" : std::filesystem::path(o.reportDir);
  std::string stem = (reports / std::filesystem::path(key.fileName()).stem()).string();
  if (!o.shard.empty())
    stem += ".shard" + std::to_string(std::atoi(o.shard.c_str()));
  std::string note;
  std::vector<std::string> files =
      writeSweepReport(result, stem, fmt::format("{} {} {}", o.op, o.dtype, key.target),
                       o.target == "ascend" ? "the chip's GM bound" : "the same-run " + baseline, rt.target().kind, note);
  fmt::print("report: {}\n", fmt::join(files, ", "));
  if (!note.empty())
    fmt::print("note: {}\n", note);
  if (mismatches)
    throw std::runtime_error(mismatchError);
}

} // namespace

void registerTuneCommand(CLI::App &app) {
  auto o = std::make_shared<TuneOptionsCli>();
  CLI::App *cmd = app.add_subcommand("tune", "Sweep the schedule space of an op, keep the winner per token bucket, "
                                             "and plot the landscape");
  cmd->add_option("op", o->op, "built-in op name");
  cmd->add_option("--dtype", o->dtype, "element type: f16, bf16, f32")->capture_default_str();
  cmd->add_option("--target", o->target,
                  "cpu, ptx (a GPU; timed with CUDA events), or ascend (the plans' cost on --chip; the tiled kernels "
                  "checked on the UB simulator)")
      ->capture_default_str();
  o->chip.add(*cmd);
  cmd->add_option("--dim", o->dims, "NAME=VALUE for a static dim (repeatable)");
  cmd->add_option("--attr", o->attrs, "NAME=VALUE for an attribute (repeatable)");
  cmd->add_option("--with", o->with, "an optional input the calls pass (repeatable)");
  cmd->add_option("--tokens", o->tokens, "token counts, comma-separated (default: spec §8.1's production count)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--budget", o->budget,
                  "seconds of timing (the compiles before it are not counted; their time is printed apart); "
                  "configs not reached in time stay untimed, and a later sweep times them (0: no limit)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--configs", o->configsFile, "a file of configs, one per line (default: the target's space)");
  cmd->add_option("--reps", o->reps, "timed runs per config (the median is kept)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--shard", o->shard, "i/n: time only every n-th config from the i-th (merge with --merge)");
  cmd->add_option("--out", o->out, "write the tuning file here instead of the cache (shards, --merge)");
  cmd->add_option("--report-dir", o->reportDir, "where the CSV and the plot go (default: <cache>/tuning/reports)");
  cmd->add_option("--compile-threads", o->compileThreads, "configs compiled at once (0: one per hardware thread)");
  cmd->add_option("--top", o->top, "rows of the ranked table per token count")->capture_default_str();
  cmd->add_flag("--list", o->list, "list the tuning files in the cache");
  cmd->add_option("--merge", o->merge, "tuning files to merge, keeping the fastest per config and bucket");
  cmd->callback([o] {
    tune::TuningDb db(defaultCacheDir() / "tuning", [](const std::string &line) {
      fmt::print(stderr, "moec: warning: {}\n", line);
    });
    if (o->list)
      return listTuned(db);
    if (!o->merge.empty())
      return mergeFiles(*o, db);
    if (o->op.empty())
      throw CLI::ValidationError("op", "give an op to sweep, or --list, or --merge");
    runSweep(*o, db);
  });
}

} // namespace moec::cli
