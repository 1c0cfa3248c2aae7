//===- Tuner.cpp - Timing a space of schedules -------------------------------===//
#include "moec/Tuner.h"

#include "moec/Autotuning.h"
#include "moec/dsl/Eval.h"
#include "moec/ops/BuiltinOps.h"

#include <algorithm>
#include <atomic>
#include <chrono>
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

/// Compiles the candidates that are not pruned and still need timing, `threads` at a time.
size_t compileAll(Runtime &rt, const std::string &op, const KernelRequest &request,
                  std::vector<Candidate> &candidates, const std::vector<bool> &needed, unsigned threads) {
  std::atomic<size_t> next{0}, compiled{0};
  auto work = [&] {
    for (size_t i = next++; i < candidates.size(); i = next++) {
      Candidate &c = candidates[i];
      if (!needed[i] || !c.pruned.empty() || c.kernel)
        continue;
      KernelRequest r = request;
      r.schedule = c.config;
      try {
        c.kernel = rt.get(op, r);
        ++compiled;
      } catch (const std::exception &e) {
        c.error = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
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

tune::ShapeFacts shapeFacts(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &statics) {
  tune::ShapeFacts facts;
  facts.elemBytes = dsl::dtypeBytes(dtype);
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
  Clock::time_point start = Clock::now();
  std::unique_ptr<dsl::OpDef> def = loadOp(op);
  Specialization spec = specializationOf(*def, request, rt.target());

  TuneResult result;
  result.file.key = tuningKey(*def, spec);
  if (options.previous && options.previous->key == result.file.key)
    result.file = *options.previous;
  tune::ShapeFacts facts = shapeFacts(*def, request.dtype, resolveStatics(*def, spec));

  // The heuristic is candidate 0; a config listed twice is tried once.
  KernelRequest base = request;
  base.schedule = Schedule{};
  std::vector<Candidate> candidates{{Schedule{}, tune::configText(Schedule{}), "", "", rt.get(op, base)}};
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
  for (size_t i = 0; i < candidates.size(); ++i)
    for (int64_t tokens : options.tokens)
      needed[i] = needed[i] || !timedBefore(candidates[i], tokens);
  unsigned threads = options.compileThreads ? options.compileThreads : std::max(1u, std::thread::hardware_concurrency());
  result.compiled = compileAll(rt, op, request, candidates, needed, threads);

  size_t total = options.tokens.size() * candidates.size(), done = 0, timedPoints = 0;
  double timingSeconds = 0;
  for (int64_t tokens : options.tokens) {
    TuneCall &call = callFor(tokens);
    int64_t bucket = tune::tokenBucket(tokens);
    call.poisonOutputs();
    candidates[0].kernel.launch(call.tensors, nullptr, call.attrs);
    std::string reference = call.outputBytes();
    size_t first = result.points.size();
    for (Candidate &c : candidates) {
      TunePoint p{tokens, c.config, c.text};
      p.bytesMoved = call.bytesMoved;
      Clock::time_point pointStart = Clock::now();
      if (!c.pruned.empty()) {
        p.status = TunePoint::Status::Pruned;
        p.why = c.pruned;
      } else if (const double *us = timedBefore(c, tokens)) {
        p.status = TunePoint::Status::Reused;
        p.medianUs = *us;
      } else if (!c.error.empty()) {
        p.status = TunePoint::Status::Failed;
        p.why = c.error;
      } else if (options.budgetSeconds > 0 && secondsSince(start) > options.budgetSeconds) {
        p.status = TunePoint::Status::Untimed;
        p.why = "the budget was spent";
      } else {
        // The check run doubles as the warm-up.
        call.poisonOutputs();
        c.kernel.launch(call.tensors, nullptr, call.attrs);
        if (call.outputBytes() != reference) {
          p.status = TunePoint::Status::Mismatch;
          p.why = "its outputs differ from the heuristic's";
        } else {
          std::vector<double> kernel, baseline;
          for (int r = 0; r < std::max(1, options.reps); ++r) {
            call.flush();
            kernel.push_back(call.secondsOf([&] { c.kernel.launch(call.tensors, nullptr, call.attrs); }));
            call.flush();
            baseline.push_back(call.secondsOf(call.baseline));
          }
          p.status = TunePoint::Status::Timed;
          p.medianUs = 1e6 * median(kernel);
          p.minUs = 1e6 * *std::min_element(kernel.begin(), kernel.end());
          p.baselineUs = 1e6 * median(baseline);
          result.file.record(bucket, c.text, p.medianUs);
          timingSeconds += secondsSince(pointStart);
          ++timedPoints;
        }
      }
      result.points.push_back(p);
      ++done;
      if (progress) {
        // Found anew each time: the points vector may have moved as it grew.
        const TunePoint *best = nullptr;
        for (size_t i = first; i < result.points.size(); ++i) {
          const TunePoint &q = result.points[i];
          if ((q.status == TunePoint::Status::Timed || q.status == TunePoint::Status::Reused) &&
              (!best || q.medianUs < best->medianUs))
            best = &q;
        }
        double perPoint = timedPoints ? timingSeconds / double(timedPoints) : 0;
        progress({done, total, &result.points.back(), best, perPoint * double(total - done)});
      }
    }
  }
  return result;
}

} // namespace moec
