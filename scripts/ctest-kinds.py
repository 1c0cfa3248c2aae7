#!/usr/bin/env python3
"""Every kind of test in a ctest build directory, without every repetition of one: writes a ctest -I file.

A kind is a test without its last parameter: `AllModes/InitRoutingV2GradRandom.MatchesReference/dropless_f16_K1_H7`
is one of 180 repetitions of `AllModes/InitRoutingV2GradRandom.MatchesReference` (the `ptx-emu.` copies of the
op tests are kinds of their own: another target). Each kind keeps its first and its last repetition, the two
ends of its parameter list (smallest and largest sizes, first and last dtype or mode); a test with no
parameter runs as it is. `make test-asan` runs this selection: the sanitizers check moec's own code, which
every repetition of a kind runs alike, and the whole suite under them took most of CI's time.

Usage: ctest-kinds.py BUILD_DIR OUT_FILE   (then: ctest --test-dir BUILD_DIR -I OUT_FILE)
"""
import re
import subprocess
import sys


def main():
    build, out = sys.argv[1], sys.argv[2]
    listing = subprocess.run(["ctest", "--test-dir", build, "-N"], check=True, capture_output=True, text=True).stdout
    tests = re.findall(r"Test +#(\d+): (\S+)", listing)
    if not tests:
        sys.exit(f"ctest-kinds.py: no tests in {build}")
    kinds = {}
    for number, name in tests:
        # A parameterized gtest name is Prefix/Suite.Test/Param: the kind drops /Param.
        kind = name.rsplit("/", 1)[0] if re.search(r"\.[^/]+/", name) else name
        kinds.setdefault(kind, []).append(int(number))
    chosen = sorted({n for numbers in kinds.values() for n in (numbers[0], numbers[-1])})
    with open(out, "w") as f:
        f.write("0,0,0," + ",".join(map(str, chosen)) + "\n")
    print(f"ctest-kinds.py: {len(chosen)} of {len(tests)} tests, every one of {len(kinds)} kinds")


if __name__ == "__main__":
    main()
