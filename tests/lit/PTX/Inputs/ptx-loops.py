#!/usr/bin/env python3
"""Summarizes what a PTX file's kernels do inside and outside their loops, for FileCheck.

A loop is a label and the last branch back to it (LLVM's PTX has no other back edges). For each entry it
prints one line:
  entry <name> loops <n> in-loop-div64 <d> outside-div64 <o> v4-ld <a> v4-st <b> shfl-bfly <s>
where div64 counts 64-bit divisions and remainders (div/rem .s64/.u64 and the __cuda_sm20_div/rem calls).
"""
import re
import sys

DIV64 = re.compile(r"\b(div|rem)\.(s|u)64\b|__cuda_sm20_(div|rem)")


def summarize(lines):
    labels = {}
    loops = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\$L__\w+):", line)
        if m:
            labels[m.group(1)] = i
        m = re.search(r"\bbra(?:\.uni)?\s+(\$L__\w+);", line)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            loops.append((labels[m.group(1)], i))
    inside = set()
    for start, end in loops:
        inside.update(range(start, end + 1))
    div_in = sum(1 for i, l in enumerate(lines) if DIV64.search(l) and i in inside)
    div_out = sum(1 for i, l in enumerate(lines) if DIV64.search(l) and i not in inside)
    def count(pattern):
        return sum(1 for l in lines if re.search(pattern, l))
    v4_ld = count(r"ld\.global(\.\w+)*\.v4\.")
    v4_st = count(r"st\.global(\.\w+)*\.v4\.")
    shfl = count(r"shfl\.sync\.bfly")
    return (f"loops {len(loops)} in-loop-div64 {div_in} outside-div64 {div_out} "
            f"v4-ld {v4_ld} v4-st {v4_st} shfl-bfly {shfl}")


def main():
    text = open(sys.argv[1]).read().splitlines()
    entries = [i for i, l in enumerate(text) if ".entry " in l]
    for n, start in enumerate(entries):
        end = entries[n + 1] if n + 1 < len(entries) else len(text)
        name = re.search(r"\.entry\s+(\w+)", text[start]).group(1)
        print(f"entry {name} {summarize(text[start:end])}")


if __name__ == "__main__":
    main()
