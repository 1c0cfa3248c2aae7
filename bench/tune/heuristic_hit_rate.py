#!/usr/bin/env python3
"""Sweeps the CPU schedule space of the three core ops at the three production shapes (spec section 8.1) and
a spread of small token counts, then re-times each case's winner against the heuristic, side by side in one
fresh run, and reports how often the heuristic is within 10 % of the winner (issue: >= 90 % of the cases).

The sweep's own ranking picks the winner out of ~70 noisy timings, which flatters it (the minimum of many
noisy samples is low); the second run times only the two, so the ratio is fair.

  bench/tune/heuristic_hit_rate.py [--moec build/bin/moec] [--out bench/tune/out] [--reps 5] [--verify-reps 15]
                                   [--quick]   (small token counts only)
                                   [--target ascend [--chip 910b]]

With --target ascend the sweep ranks the UB plan's configs by the plans' cost on the chip, which is
deterministic: the sweep's own figures decide, with no second run.
"""
import argparse
import csv
import json
import os
import pathlib
import subprocess
import sys

# name, op, dtype, statics (--dim/--attr), production tokens
SHAPES = [
    ("DeepSeek-V3", 7168, 8, 256, 4096),
    ("Qwen3", 4096, 8, 128, 8192),
    ("Mixtral", 4096, 2, 8, 8192),
]
SMALL_TOKENS = [64, 512]


def op_args(op, h, k, e):
    if op == "moe_init_routing_v2_grad":
        return ["--dim", f"H={h}", "--attr", f"top_k={k}"]
    if op == "moe_token_unpermute_with_routing_map_grad":
        return ["--dim", f"H={h}", "--dim", f"E={e}"]
    return ["--dim", f"H={h}", "--dim", f"E={e}", "--dim", f"K={k}"]


OPS = ["moe_init_routing_v2_grad", "moe_token_unpermute_with_routing_map_grad", "moe_unpermute"]
SHORT = {OPS[0]: "B2", OPS[1]: "A3", OPS[2]: "C2"}


def run(cmd, env):
    result = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def csv_of(stdout):
    for line in stdout.splitlines():
        if line.startswith("report: "):
            return line[len("report: "):].split(", ")[0]
    sys.exit("no report line in:\n" + stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--moec", default="build/bin/moec")
    p.add_argument("--out", default="bench/tune/out")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--verify-reps", type=int, default=15)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--target", default="cpu", choices=["cpu", "ascend"])
    p.add_argument("--chip", default="910b")
    a = p.parse_args()
    out = pathlib.Path(a.out)
    env = dict(os.environ, MOEC_CACHE_DIR=str(out / "cache"))
    rows, hits = [], 0
    for name, h, k, e, prod in SHAPES:
        for op in OPS:
            tokens = SMALL_TOKENS + ([] if a.quick else [prod])
            target = ["--target", a.target] + (["--chip", a.chip] if a.target == "ascend" else [])
            base = [a.moec, "tune", op, "--dtype", a.dtype] + target + op_args(op, h, k, e)
            sweep = run(base + ["--tokens", ",".join(map(str, tokens)), "--reps", str(a.reps),
                                "--report-dir", str(out / "reports")], env)
            tuning = [l for l in sweep.splitlines() if l.startswith("tuning file: ")][0][len("tuning file: "):]
            buckets = json.load(open(tuning))["buckets"]
            for t in tokens:
                bucket = buckets[str(1 << (t - 1).bit_length())]
                winner = bucket["best"]
                if a.target == "ascend":  # the cost model is deterministic: the sweep's figures decide
                    heuristic, best = bucket["timings"]["heuristic"], bucket["us"]
                    hit = heuristic <= 1.10 * best
                    hits += hit
                    rows.append((SHORT[op], name, t, winner, best, heuristic, heuristic / best, hit))
                    print(f"{SHORT[op]} {name} T={t}: winner {winner} {best:.1f} us, heuristic {heuristic:.1f} us, "
                          f"heuristic / best {heuristic / best:.3f} {'hit' if hit else 'MISS'}", flush=True)
                    continue
                configs = out / "verify" / f"{SHORT[op]}-{name}-{t}.txt"
                configs.parent.mkdir(parents=True, exist_ok=True)
                configs.write_text(winner + "\n")
                verify_json = configs.with_suffix(".json")
                if verify_json.exists():
                    verify_json.unlink()  # a fresh file: nothing is reused
                verify = run(base + ["--tokens", str(t), "--reps", str(a.verify_reps), "--configs", str(configs),
                                     "--out", str(verify_json), "--report-dir", str(out / "verify")], env)
                times = {r["config"]: float(r["median_us"]) for r in csv.DictReader(open(csv_of(verify)))}
                heuristic = times["heuristic"]
                best = min(times.values())
                hit = heuristic <= 1.10 * best
                hits += hit
                rows.append((SHORT[op], name, t, winner, times.get(winner, heuristic), heuristic, heuristic / best, hit))
                print(f"{SHORT[op]} {name} T={t}: winner {winner} {times.get(winner, heuristic):.1f} us, heuristic "
                      f"{heuristic:.1f} us, heuristic / best {heuristic / best:.3f} {'hit' if hit else 'MISS'}",
                      flush=True)
    print("\n| op | shape | tokens | tuned best | best us | heuristic us | heuristic / best | within 10 % |")
    print("|---|---|---|---|---|---|---|---|")
    for op, name, t, winner, best_us, heur_us, ratio, hit in rows:
        print(f"| {op} | {name} | {t} | `{winner}` | {best_us:.1f} | {heur_us:.1f} | {ratio:.3f} | "
              f"{'yes' if hit else 'no'} |")
    print(f"\nheuristic within 10 % of the tuned best in {hits} of {len(rows)} cases ({100 * hits / len(rows):.0f} %)")


if __name__ == "__main__":
    main()
