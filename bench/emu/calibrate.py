#!/usr/bin/env python3
"""Calibrates the PTX emulator's GPU time estimate against measured GPU cells (issue 57).

The emulator counts, for each kernel launch, the 32-byte sectors it moves, its warp instructions and each
warp's cycles on a latency timeline (runtime/ptxemu). The estimate turns those counts into a time with a
few constants; this script fits the constants to the cells a GPU measured, as a share of a same-run
device copy, on two model shapes, and reports the error on the third, held out.

Inputs, both kept in the repo:
  bench/gpu/RESULTS.md                    the measured cells (a run's table: op, dtype, mode, shape, us, %)
  bench/emu/calibration/<commit>.jsonl    the emulator's counts for the kernels a run measured, one file per
                                          commit (moec-emu-estimate over that commit's bundle; --regenerate);
                                          RUNS below says which runs, columns and ops
Outputs:
  bench/emu/calibration.json              the fitted constants, the error tables, each cell's estimate
  include/moec/runtime/ptxemu/Calibration.h   the constants and the error bands for the C++ estimate

  bench/emu/calibrate.py            fit and print the report
  bench/emu/calibrate.py --write    also write the two outputs
  bench/emu/calibrate.py --check    fail unless the outputs are what a fit gives today (ctest runs this)
  bench/emu/calibrate.py --regenerate COMMIT [--entries FIRST:COUNT --counts FILE]
                                    recount a commit's kernels (a worktree, its moec and bundle, and a
                                    runtime-only build of that tree with today's emulator: an hour of CPU
                                    for all of them), then fit

Pure Python (no numpy here): a Nelder-Mead search in log space, deterministic.
"""
import argparse
import json
import math
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibration_model as model  # noqa: E402

# The measured runs: bench/gpu/RESULTS.md's section, the column, the commit whose kernels it measured, and the
# ops whose kernels of that commit are counted (bench/emu/calibration/<commit>.jsonl). The "before" column's
# A3 kernels are not counted: every block of theirs runs, an hour of CPU.
RUNS = [{"section": "# GPU check on an H200 (2026-12-04)", "column": "after", "commit": "1cee32e",
         "gpu": "H200", "date": "2026-12-04", "ops": ["A3", "B2", "C2"]},
        {"section": "# GPU check on an H200 (2026-12-04)", "column": "before", "commit": "21563fc",
         "gpu": "H200", "date": "2026-12-04", "ops": ["B2", "C2"]}]
SHAPES = {"DeepSeek-V3": (7168, 256, 8), "Qwen3": (4096, 128, 8), "Mixtral": (4096, 8, 2)}
FIT_SHAPES, HELD_OUT = ("DeepSeek-V3", "Qwen3"), "Mixtral"
OPS = {"moe_token_unpermute_with_routing_map_grad": "A3", "moe_init_routing_v2_grad": "B2", "moe_unpermute": "C2"}


def measured_cells(path, section, column):
    """{(op, dtype, mode, shape): fraction of copy} from the markdown table under `section`."""
    text = open(path).read()
    start = text.index(section)
    end = text.find("\n# ", start + 1)
    body = text[start:end if end > 0 else len(text)]
    cells, header = {}, None
    for line in body.splitlines():
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cols = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cols
            index = next(i for i, c in enumerate(cols) if c.startswith(column))
            continue
        pct = re.search(r"([\d.]+) %", cols[index])
        if pct:
            cells[(cols[0], cols[1], cols[2], cols[3])] = float(pct.group(1)) / 100
    if not cells:
        sys.exit(f"calibrate.py: no '{column}' cells under '{section}' in {path}")
    return cells


def shape_of(line):
    op = OPS[line["op"]]
    for name, (h, e, k) in SHAPES.items():
        if line["H"] == h and (line["E"] == e if op != "B2" else line["K"] == k):
            return name
    return None


def counted_cells(path):
    cells = {}
    for raw in open(path):
        line = json.loads(raw)
        key = (OPS[line["op"]], line["dtype"], line["mode"], shape_of(line))
        cells[key] = line
    return cells


def joined(run, measured, counted):
    rows = []
    for key, fraction in sorted(measured.items()):
        if key[0] not in run["ops"]:
            continue
        if key not in counted:
            sys.exit(f"calibrate.py: the counts of {run['commit']} have no line for measured cell {key}")
        rows.append({"key": key, "commit": run["commit"], "measured": fraction, "counts": counted[key]})
    return rows


def sources(runs):
    """One line: the runs and cells the calibration comes from."""
    parts = [f"{r['commit']}" + ("" if len(r["ops"]) == 3 else f" ({', '.join(r['ops'])})") for r in runs]
    return f"{runs[0]['gpu']} run of {runs[0]['date']}, the kernels of {' and '.join(parts)} (bench/gpu/RESULTS.md)"


def counts_path(commit):
    return os.path.join(ROOT, f"bench/emu/calibration/{commit}.jsonl")


def errors(rows, params):
    """Signed errors of the estimate, in points of copy bandwidth."""
    return [100 * (model.fraction_of_copy(r["counts"], params) - r["measured"]) for r in rows]


def objective(rows):
    def f(logs):
        params = model.from_logs(logs)
        return sum(e * e for e in errors(rows, params)) / len(rows)
    return f


def nelder_mead(f, x0, step=0.3, iterations=4000, tolerance=1e-10):
    n = len(x0)
    simplex = [list(x0)] + [[x0[j] + (step if j == i else 0) for j in range(n)] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(n + 1), key=lambda i: values[i])
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if values[-1] - values[0] < tolerance:
            break
        centroid = [sum(x[j] for x in simplex[:-1]) / n for j in range(n)]
        def along(t):
            return [centroid[j] + t * (simplex[-1][j] - centroid[j]) for j in range(n)]
        reflected = along(-1)
        fr = f(reflected)
        if fr < values[0]:
            expanded = along(-2)
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = along(0.5)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                for i in range(1, n + 1):
                    simplex[i] = [simplex[0][j] + 0.5 * (simplex[i][j] - simplex[0][j]) for j in range(n)]
                    values[i] = f(simplex[i])
    best = min(range(n + 1), key=lambda i: values[i])
    return simplex[best]


def summary(rows, params):
    errs = errors(rows, params)
    absolute = [abs(e) for e in errs]
    return {"cells": len(rows), "mean_abs": round(sum(absolute) / len(absolute), 2),
            "worst": round(max(absolute), 2)}


def by_op(rows, params):
    return {op: summary([r for r in rows if r["key"][0] == op], params)
            for op in sorted({r["key"][0] for r in rows})}


def fit(rows):
    train = [r for r in rows if r["key"][3] in FIT_SHAPES]
    held = [r for r in rows if r["key"][3] == HELD_OUT]
    logs = model.to_logs(model.START)
    for step in (0.3, 0.05, 0.2):  # restarts: Nelder-Mead stalls on a ridge
        logs = nelder_mead(objective(train), logs, step=step)
    params = model.rounded(model.from_logs(logs))
    cells = [{"commit": r["commit"], "op": r["key"][0], "dtype": r["key"][1], "mode": r["key"][2], "shape": r["key"][3],
              "op_name": r["counts"]["op"], "H": r["counts"]["H"], "E": r["counts"]["E"], "K": r["counts"]["K"],
              "measured": round(100 * r["measured"], 1),
              "uncalibrated": round(100 * model.fraction_of_copy(r["counts"]), 1),
              "estimate": round(100 * model.fraction_of_copy(r["counts"], params), 1),
              "held_out": r["key"][3] == HELD_OUT} for r in rows]
    return {"runs": RUNS, "source": sources(RUNS), "fit_shapes": list(FIT_SHAPES), "held_out_shape": HELD_OUT,
            "model": model.DESCRIPTION, "parameters": params,
            "fit": {"all": summary(train, params), "by_op": by_op(train, params)},
            "held_out": {"all": summary(held, params), "by_op": by_op(held, params),
                         "by_op_name": {name: summary([r for r in held if r["counts"]["op"] == name], params)
                                        for name in sorted({r["counts"]["op"] for r in held})}},
            "uncalibrated": {"fit": summary(train, None), "held_out": summary(held, None),
                             "held_out_by_op": by_op(held, None)},
            "cells": cells}


def report(result):
    out = [f"Fitted on {result['fit']['all']['cells']} cells ({', '.join(result['fit_shapes'])}), "
           f"held out {result['held_out']['all']['cells']} ({result['held_out_shape']}); {result['source']}",
           "parameters: " + ", ".join(f"{k} {v:g}" for k, v in result["parameters"].items()),
           "| cells | uncalibrated: mean, worst | calibrated: mean, worst |", "|---|---|---|"]
    for name, cal, unc in (("fit", result["fit"]["all"], result["uncalibrated"]["fit"]),
                           ("held out", result["held_out"]["all"], result["uncalibrated"]["held_out"])):
        out.append(f"| {name} ({cal['cells']}) | {unc['mean_abs']}, {unc['worst']} | {cal['mean_abs']}, {cal['worst']} |")
    for op, s in result["held_out"]["by_op"].items():
        u = result["uncalibrated"]["held_out_by_op"][op]
        out.append(f"| held out, {op} ({s['cells']}) | {u['mean_abs']}, {u['worst']} | {s['mean_abs']}, {s['worst']} |")
    out += ["", "| kernels of | op | dtype | mode | shape | measured | uncalibrated | calibrated |",
            "|---|---|---|---|---|---|---|---|"]
    for c in result["cells"]:
        shape = c["shape"] + (" (held out)" if c["held_out"] else "")
        out.append(f"| {c['commit']} | {c['op']} | {c['dtype']} | {c['mode']} | {shape} | {c['measured']} | "
                   f"{c['uncalibrated']} | {c['estimate']} |")
    return "\n".join(out) + "\n"


def header_text(result):
    p, held = result["parameters"], result["held_out"]
    lines = ["//===- Calibration.h - The estimate's constants, fitted to a GPU run -*- C++ -*-===//",
             "//",
             "// Generated by bench/emu/calibrate.py --write from bench/emu/calibration.json; do not edit (ctest's",
             "// emu.calibration fails when this file is not what a fit gives). The model: bench/emu/calibration_model.py.",
             f"// Fitted on the cells of the {result['source']}",
             f"// at {' and '.join(result['fit_shapes'])};",
             f"// the error bands are the held-out {result['held_out_shape']} cells' (points of copy bandwidth).",
             "//===----------------------------------------------------------------------===//",
             "#pragma once", "", "namespace moec::ptxemu::calibration {", ""]
    for name, value in p.items():
        lines.append(f"constexpr double k{model.camel(name)} = {value!r};")
    lines += ["", f'constexpr const char *kSource = "{result["source"]}, fitted at {" and ".join(result["fit_shapes"])}, '
              f'held out {result["held_out_shape"]}";', "",
              "struct Band {", "  const char *op; // the op's name, or \"all\"", "  int cells;", "  double meanAbs, worst;", "};",
              "/// Per op, then every held-out cell together (op \"all\").", "constexpr Band kHeldOut[] = {"]
    for op, s in list(held["by_op_name"].items()) + [("all", held["all"])]:
        lines.append(f'    {{"{op}", {s["cells"]}, {s["mean_abs"]!r}, {s["worst"]!r}}},')
    lines += ["};", "", "} // namespace moec::ptxemu::calibration", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=os.path.join(ROOT, "bench/gpu/RESULTS.md"))
    parser.add_argument("--counts", help="with --regenerate: where the counts go (default: the commit's file in "
                        "bench/emu/calibration/)")
    parser.add_argument("--json", default=os.path.join(ROOT, "bench/emu/calibration.json"))
    parser.add_argument("--header", default=os.path.join(ROOT, "include/moec/runtime/ptxemu/Calibration.h"))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--regenerate", metavar="COMMIT")
    parser.add_argument("--entries", metavar="FIRST:COUNT",
                        help="with --regenerate: only these bundle entries, into --counts, then stop (a check that "
                             "the counts reproduce)")
    args = parser.parse_args()
    if args.regenerate:
        import regenerate_counts
        first, count = (int(x) for x in args.entries.split(":")) if args.entries else (0, None)
        counts = args.counts or counts_path(args.regenerate)
        regenerate_counts.run(ROOT, args.regenerate, counts, first, count)
        if args.entries:
            return
    rows = []
    for run in RUNS:
        rows += joined(run, measured_cells(args.results, run["section"], run["column"]),
                       counted_cells(counts_path(run["commit"])))
    result = fit(rows)
    text, header = json.dumps(result, indent=1) + "\n", header_text(result)
    if args.check:
        stale = [path for path, want in ((args.json, text), (args.header, header))
                 if not os.path.exists(path) or open(path).read() != want]
        if stale:
            sys.exit("calibrate.py --check: not what the fit gives (run bench/emu/calibrate.py --write): " +
                     ", ".join(stale))
        print(f"calibration up to date: held out mean {result['held_out']['all']['mean_abs']}, "
              f"worst {result['held_out']['all']['worst']} points")
        return
    sys.stdout.write(report(result))
    if args.write:
        open(args.json, "w").write(text)
        open(args.header, "w").write(header)


if __name__ == "__main__":
    main()
