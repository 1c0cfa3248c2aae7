#!/usr/bin/env python3
"""Mutation run: applies each mutation of mutations.py to a scratch copy of the repository (HEAD, never
this worktree's files), builds it, runs the tests chosen for it, and prints a table of what caught it.

Usage (see run.sh): run.py <repo> <scratch dir> [mutation name ...]
       run.py --check <repo>: only whether every mutation's texts occur once each in the repo's files (a lit
       test runs it, so that a mutation whose code moved is rewritten, not left to report "not applied").
The scratch copy lives at <scratch>/src, built in <scratch>/src/build: with CCACHE_BASEDIR set to a
folder above both trees, the compile commands match the main build's and ccache serves the unchanged files.
"""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mutations import MUTATIONS  # noqa: E402

LIT = shutil.which("lit") or "/usr/lib/llvm-22/bin/lit"
JOBS = os.environ.get("JOBS", "2")


def sh(cmd, cwd, log):
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode


def prepare(repo, scratch, log):
    src = os.path.join(scratch, "src")
    build = os.path.join(src, "build")
    # A build left by an earlier run is kept (moved aside while the sources are replaced); the files are
    # extracted with the current time (tar -m), so ninja rebuilds them all and ccache serves them.
    kept = os.path.join(scratch, "build.kept")
    shutil.rmtree(kept, ignore_errors=True)
    if os.path.isdir(build):
        os.rename(build, kept)
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    archive = subprocess.run(["git", "-C", repo, "archive", "HEAD"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-m", "-C", src], input=archive, check=True)
    if os.path.isdir(kept):
        os.rename(kept, build)
    rc = sh(["cmake", "-S", ".", "-B", "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
             "-DCMAKE_C_COMPILER=clang-22", "-DCMAKE_CXX_COMPILER=clang++-22"], src, log)
    if rc != 0:
        sys.exit(f"configure failed, see {log}")
    return src, build


def run_tests(build, ctest_regex, lit_filter, log):
    """The names of the failing tests (ctest and lit)."""
    failed = []
    if ctest_regex:
        out = subprocess.run(["ctest", "--test-dir", build, "-R", ctest_regex, "-j", JOBS, "--timeout", "300"],
                             capture_output=True, text=True)
        open(log, "a").write(out.stdout + out.stderr)
        # Every test ctest lists as failed, whatever the reason: Failed, Timeout, SEGFAULT, NUMERICAL (SIGFPE), ...
        listed = out.stdout.split("The following tests FAILED:", 1)
        if len(listed) == 2:
            # A value-parameterized test is listed as "NAME  # GetParam() = VALUE (Failed)".
            failed += re.findall(r"^\s*\d+ - (\S+)(?:\s+# GetParam\(\) = .*?)? \([^)]*\)\s*$", listed[1], re.M)
        if "No tests were found" in out.stdout + out.stderr:
            failed.append("(no ctest matched " + ctest_regex + ")")
    if lit_filter:
        out = subprocess.run([LIT, "--timeout", "300", "-j", JOBS, "--filter", lit_filter,
                              os.path.join(build, "tests", "lit")], capture_output=True, text=True)
        open(log, "a").write(out.stdout + out.stderr)
        failed += ["lit:" + t for t in re.findall(r"^\s+moec :: (\S+)$", out.stdout, re.M)]
    return failed


def unapplicable(repo):
    """The mutations whose texts do not occur exactly once each, with the counts."""
    stale = []
    for name, _, edits, _, _ in MUTATIONS:
        counts = [open(os.path.join(repo, path)).read().count(old) for path, old, _ in edits]
        if counts != [1] * len(edits):
            stale.append((name, counts))
    return stale


def main():
    if sys.argv[1:2] == ["--check"]:
        stale = unapplicable(os.path.abspath(sys.argv[2]))
        for name, counts in stale:
            print(f"{name}: the texts to replace occur {counts} times")
        print(f"{len(MUTATIONS) - len(stale)} of {len(MUTATIONS)} mutations apply")
        sys.exit(1 if stale else 0)
    repo, scratch = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    only = set(sys.argv[3:])
    os.makedirs(scratch, exist_ok=True)
    log = os.path.join(scratch, "log.txt")
    open(log, "w").close()
    src, build = prepare(repo, scratch, log)
    start = time.time()
    if sh(["ninja", "-C", build, "-j", JOBS], src, log) != 0:
        sys.exit(f"the unmutated copy does not build, see {log}")
    print(f"baseline build: {time.time() - start:.0f} s", flush=True)
    rows = []
    baselines = {}  # (ctest regex, lit filter) -> the tests that fail unmutated (should be none)
    for name, what, edits, ctest_regex, lit_filter in MUTATIONS:
        if only and name not in only:
            continue
        start = time.time()
        originals = {path: open(os.path.join(src, path)).read() for path, _, _ in edits}
        counts = [originals[path].count(old) for path, old, _ in edits]
        if counts != [1] * len(edits):
            rows.append((name, what, "not applied", f"the texts to replace occur {counts} times", 0))
            continue
        if (ctest_regex, lit_filter) not in baselines:
            baselines[(ctest_regex, lit_filter)] = run_tests(build, ctest_regex, lit_filter, log)
        baseline = baselines[(ctest_regex, lit_filter)]
        mutated = dict(originals)
        for path, old, new in edits:
            mutated[path] = mutated[path].replace(old, new)
        try:
            for path, text in mutated.items():
                open(os.path.join(src, path), "w").write(text)
            if sh(["ninja", "-C", build, "-j", JOBS], src, log) != 0:
                rows.append((name, what, "build failed", "the mutant does not compile", time.time() - start))
                continue
            failed = [t for t in run_tests(build, ctest_regex, lit_filter, log) if t not in baseline]
        finally:
            for path, text in originals.items():
                open(os.path.join(src, path), "w").write(text)
            # Rebuilt unmutated before the next baseline or mutation (ccache serves the original objects).
            sh(["ninja", "-C", build, "-j", JOBS], src, log)
        caught = "yes" if failed else "NO"
        shown = ", ".join(failed[:4]) + (f" (+{len(failed) - 4} more)" if len(failed) > 4 else "")
        if baseline:
            shown += f" [failing before the mutation too: {', '.join(baseline[:3])}]"
        rows.append((name, what, caught, shown or "-", time.time() - start))
        print(f"{name}: {caught} ({time.time() - start:.0f} s) {shown}", flush=True)

    print("\n| mutation | what | caught? | by which tests | seconds |")
    print("|---|---|---|---|---|")
    for name, what, caught, tests, secs in rows:
        print(f"| {name} | {what} | {caught} | {tests} | {secs:.0f} |")


if __name__ == "__main__":
    main()
