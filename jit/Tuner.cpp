//===- Tuner.cpp - Timing a space of schedules -------------------------------===//
#include "moec/jit/Tuner.h"

#include "moec/dsl/Eval.h"
#include "moec/jit/Autotuning.h"
#include "moec/ops/BuiltinOps.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

namespace moec {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// A config of the sweep: the heuristic first (Schedule{}), then the candidates.
struct Candidate {
  Schedule config;
  std::string text;
  std::string pruned; // why it is not compiled
  std::string error;  // why it did not compile
  Kernel kernel;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Compiles the candidates that are not pruned and still need timing (`needed`), `threads` at a time,
/// reporting each as it finishes. Returns how many compiled.
size_t compileAll(Runtime &rt, const std::string &op, const KernelRequest &request,
                  std::vector<Candidate> &candidates, const std::vector<bool> &needed, unsigned threads,
                  const std::function<void(const TuneCompileProgress &)> &progress) {
  std::vector<size_t> work;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (needed[i] && candidates[i].pruned.empty() && !candidates[i].kernel)
      work.push_back(i);
  Clock::time_point start = Clock::now();
  std::atomic<size_t> next{0}, compiled{0};
  std::mutex reporting;
  size_t done = 0;
  auto reportDone = [&](const Candidate &c) {
    std::lock_guard<std::mutex> lock(reporting);
    ++done;
    if (progress)
      progress({done, work.size(), c.text, c.error, secondsSince(start)});
  };
  // The heuristic first, alone: what stops it (a bad spec, a compiler error) stops the sweep as it is.
  if (!work.empty() && work.front() == 0) {
    KernelRequest r = request;
    r.schedule = Schedule{};
    candidates[0].kernel = rt.get(op, r);
    ++compiled;
    ++next;
    reportDone(candidates[0]);
  }
  auto worker = [&] {
    for (size_t w = next++; w < work.size(); w = next++) {
      Candidate &c = candidates[work[w]];
      KernelRequest r = request;
      r.schedule = c.config;
      try {
        c.kernel = rt.get(op, r);
        ++compiled;
      } catch (const std::exception &e) {
        c.error = e.what();
      }
      reportDone(c);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(threads, work.size()); ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
  return compiled;
}

} // namespace

const char *statusName(TunePoint::Status s) {
  switch (s) {
  case TunePoint::Status::Timed: return "timed";
  case TunePoint::Status::Reused: return "reused";
  case TunePoint::Status::Pruned: return "pruned";
  case TunePoint::Status::Failed: return "failed";
  case TunePoint::Status::Mismatch: return "mismatch";
  case TunePoint::Status::Untimed: return "untimed";
  }
  return "?";
}

tune::ShapeFacts shapeFacts(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &statics,
                            const Target &target) {
  tune::ShapeFacts facts;
  facts.elemBytes = dsl::dtypeBytes(dtype);
  if (target.chip) {
    facts.ubBytes = target.chip->ubBytes;
    facts.maxCopyBytes = target.chip->maxCopyBytes;
  }
  dsl::Bindings b;
  for (const auto &[name, value] : statics) {
    b.values[name] = value;
    if (const dsl::AttrDecl *a = op.findAttr(name))
      b.values[a->innerName()] = value;
  }
  for (const dsl::TensorDecl &t : op.tensors)
    if (t.isOutput && !t.shape.empty()) {
      try {
        facts.inner = dsl::evalInt(*t.shape.back().size, b);
      } catch (const dsl::EvalError &) {
        facts.inner = 0; // a runtime extent
      }
      break;
    }
  return facts;
}

TuneResult tuneOp(Runtime &rt, const std::string &op, const KernelRequest &request, const TuneOptions &options,
                  const std::function<TuneCall &(int64_t tokens)> &callFor,
                  const std::function<void(const TuneProgress &)> &progress) {
  std::unique_ptr<dsl::OpDef> def = loadOp(op);
  ResolvedSpecialization spec = resolve(*def, specializationOf(*def, request, rt.target()));

  TuneResult result;
  result.file.key = tuningKey(*def, spec);
  if (options.previous && options.previous->key == result.file.key)
    result.file = *options.previous;
  tune::ShapeFacts facts = shapeFacts(*def, request.dtype, spec.statics, rt.target());

  // The heuristic is candidate 0; a config listed twice is tried once.
  std::vector<Candidate> candidates{{Schedule{}, tune::configText(Schedule{}), "", "", {}}};
  std::set<std::string> seen{candidates[0].text};
  for (const Schedule &s : options.configs) {
    Candidate c{s, tune::configText(s), tune::prunedBecause(s, rt.target().kind, facts), "", {}};
    if (seen.insert(c.text).second)
      candidates.push_back(std::move(c));
  }
  auto timedBefore = [&](const Candidate &c, int64_t tokens) -> const double * {
    auto bucket = result.file.buckets.find(tune::tokenBucket(tokens));
    if (bucket == result.file.buckets.end())
      return nullptr;
    auto it = bucket->second.timings.find(c.text);
    return it == bucket->second.timings.end() ? nullptr : &it->second;
  };
  std::vector<bool> needed(candidates.size(), false);
  needed[0] = true; // the heuristic's outputs are the reference
  for (size_t i = 0; i < candidates.size(); ++i)
    for (int64_t tokens : options.tokens)
      needed[i] = needed[i] || !timedBefore(candidates[i], tokens);
  result.considered = candidates.size();
  for (size_t i = 0; i < candidates.size(); ++i) {
    result.pruned += !candidates[i].pruned.empty();
    result.timedEarlier += candidates[i].pruned.empty() && !needed[i];
  }
  if (options.planned) {
    TunePlan plan{result.considered, 0, result.timedEarlier, {}};
    for (size_t i = 0; i < candidates.size(); ++i)
      if (!candidates[i].pruned.empty())
        plan.pruned.emplace_back(candidates[i].text, candidates[i].pruned);
      else
        plan.toCompile += needed[i];
    options.planned(plan);
  }
  unsigned threads = options.compileThreads ? options.compileThreads : std::max(1u, std::thread::hardware_concurrency());
  Clock::time_point compileStart = Clock::now();
  result.compiled = compileAll(rt, op, request, candidates, needed, threads, options.compileProgress);
  result.compileSeconds = secondsSince(compileStart);
  for (const Candidate &c : candidates)
    result.failed += !c.error.empty();

  // What the budget bounds starts here: the reference runs, the checks and the timing.
  Clock::time_point start = Clock::now();
  size_t total = 0, done = 0, timedPoints = 0;
  for (const Candidate &c : candidates) // the points the timing settles: pruned and failed ones are settled
    for (int64_t tokens : options.tokens)
      total += c.pruned.empty() && (c.error.empty() || timedBefore(c, tokens));
  double timingSeconds = 0;
  for (int64_t tokens : options.tokens) {
    TuneCall &call = callFor(tokens);
    int64_t bucket = tune::tokenBucket(tokens);
    call.poisonOutputs();
    candidates[0].kernel.launch(call.tensors, nullptr, call.attrs);
    std::string reference = call.outputBytes();
    std::vector<TunePoint> points;
    for (const Candidate &c : candidates) {
      points.push_back({tokens, c.config, c.text});
      points.back().bytesMoved = call.bytesMoved;
    }
    auto report = [&](const TunePoint &p) {
      ++done;
      if (!progress)
        return;
      const TunePoint *best = nullptr;
      for (const TunePoint &q : points)
        if ((q.status == TunePoint::Status::Timed || q.status == TunePoint::Status::Reused) &&
            (!best || q.medianUs < best->medianUs))
          best = &q;
      double perPoint = timedPoints ? timingSeconds / double(timedPoints) : 0;
      progress({done, total, &p, best, perPoint * double(total - done)});
    };

    // What needs no timing is settled first; the rest pass the bit-for-bit check (which doubles as the
    // warm-up) before any is timed.
    std::vector<size_t> toTime;
    for (size_t i = 0; i < candidates.size(); ++i) {
      Candidate &c = candidates[i];
      TunePoint &p = points[i];
      if (!c.pruned.empty()) { // settled before the timing: not among its progress's points
        p.status = TunePoint::Status::Pruned;
        p.why = c.pruned;
        continue;
      }
      if (const double *us = timedBefore(c, tokens)) {
        p.status = TunePoint::Status::Reused;
        p.medianUs = *us;
      } else if (!c.error.empty()) {
        p.status = TunePoint::Status::Failed;
        p.why = c.error;
        continue;
      } else {
        call.poisonOutputs();
        c.kernel.launch(call.tensors, nullptr, call.attrs);
        if (call.outputBytes() == reference) {
          toTime.push_back(i);
          continue;
        }
        p.status = TunePoint::Status::Mismatch;
        p.why = "its outputs differ from the heuristic's";
      }
      report(p);
    }

    if (call.modeledSeconds) { // the cost model's times: one evaluation each, no clock, nothing to flush
      for (size_t i : toTime) {
        TunePoint &p = points[i];
        p.status = TunePoint::Status::Timed;
        p.medianUs = p.minUs = 1e6 * call.modeledSeconds(candidates[i].config);
        p.baselineUs = 1e6 * call.modeledBaselineSeconds;
        result.file.record(bucket, p.text, p.medianUs);
        report(p);
      }
      toTime.clear();
    }

    // Timed in groups, each run of a group's configs in turn, rep after rep: on a shared machine whose
    // speed drifts (other tenants, frequency), every config of a group sees the same conditions, so their
    // ranking is fair. The budget is checked before each group.
    constexpr size_t kGroup = 16;
    for (size_t g = 0; g < toTime.size(); g += kGroup) {
      std::vector<size_t> group(toTime.begin() + g, toTime.begin() + std::min(toTime.size(), g + kGroup));
      if (options.budgetSeconds > 0 && secondsSince(start) > options.budgetSeconds) {
        result.budgetSpent = true;
        for (size_t i : group) {
          points[i].status = TunePoint::Status::Untimed;
          points[i].why = "the budget was spent";
          report(points[i]);
        }
        continue;
      }
      Clock::time_point groupStart = Clock::now();
      std::vector<std::vector<double>> kernel(group.size()), baseline(group.size());
      for (int r = 0; r < std::max(1, options.reps); ++r)
        for (size_t m = 0; m < group.size(); ++m) {
          const Kernel &k = candidates[group[m]].kernel;
          call.flush();
          kernel[m].push_back(call.secondsOf([&] { k.launch(call.tensors, nullptr, call.attrs); }));
          call.flush();
          baseline[m].push_back(call.secondsOf(call.baseline));
        }
      timingSeconds += secondsSince(groupStart);
      timedPoints += group.size();
      for (size_t m = 0; m < group.size(); ++m) {
        TunePoint &p = points[group[m]];
        p.status = TunePoint::Status::Timed;
        p.medianUs = 1e6 * median(kernel[m]);
        p.minUs = 1e6 * *std::min_element(kernel[m].begin(), kernel[m].end());
        p.baselineUs = 1e6 * median(baseline[m]);
        result.file.record(bucket, p.text, p.medianUs);
        report(p);
      }
    }
    result.points.insert(result.points.end(), points.begin(), points.end());
  }
  result.timingSeconds = secondsSince(start);
  return result;
}

} // namespace moec
