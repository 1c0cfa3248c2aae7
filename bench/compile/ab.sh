#!/usr/bin/env bash
# Compile time of every example specialization (ops/examples.json) by two builds of moec side by side:
# `moec emit ... --emit asm` (CPU: DSL to host assembly text; since stop 63 without the object the runtime
# would also build and load) and `--emit ptx` (sm_90: DSL to PTX), each a fresh
# process, the two builds' runs alternating REPS (7) times, medians in ms (process start-up, ~20 ms on a
# 2-core VM, included in both). Usage: AGAINST=/path/to/old/moec bash bench/compile/ab.sh [TARGETS]
# (TARGETS: "cpu ptx" by default); MOEC=path picks the new build's moec.
set -euo pipefail
cd "$(dirname "$0")/../.."
new=${MOEC:-build/bin/moec}
old=${AGAINST:?set AGAINST to the moec to compare with}
python3 - "$old" "$new" "${REPS:-7}" ${1:-cpu ptx} <<'PY'
import json, statistics, subprocess, sys, tempfile, time
old, new, reps, targets = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
examples = json.load(open("ops/examples.json"))
print(f"| op | specialization | target | {old} ms | {new} ms | new / old |")
print("|---|---|---|---|---|---|")
with tempfile.TemporaryDirectory() as cache:
    env = {"MOEC_CACHE_DIR": cache, "PATH": "/usr/bin:/bin"}
    for op, specs in examples.items():
        for spec in specs:
            args = ["--dtype", spec["dtype"]]
            for name, value in spec["statics"].items():  # dims are upper case, attributes lower case
                args += ["--dim" if name[0].isupper() else "--attr", f"{name}={value}"]
            for tensor in spec.get("with", []):
                args += ["--with", tensor]
            label = " ".join(f"{k}={v}" for k, v in spec["statics"].items()) + " " + spec["dtype"] + \
                "".join(" +" + t for t in spec.get("with", []))
            for target in targets:
                emit = ["--target", "cpu", "--emit", "asm"] if target == "cpu" else \
                    ["--target", "ptx", "--arch", "sm_90", "--emit", "ptx"]
                times = {old: [], new: []}
                for _ in range(reps):
                    for exe in (old, new):
                        start = time.perf_counter()
                        subprocess.run([exe, "emit", op, *args, *emit, "-o", "/dev/null"], env=env, check=True,
                                       stdout=subprocess.DEVNULL)
                        times[exe].append((time.perf_counter() - start) * 1e3)
                a, b = statistics.median(times[old]), statistics.median(times[new])
                print(f"| {op} | {label} | {target} | {a:.0f} | {b:.0f} | {b / a:.2f} |", flush=True)
PY
