#!/usr/bin/env python3
"""Summarizes what a PTX file's kernels do inside and outside their loops, for FileCheck.

Loops are the natural loops of each entry's control-flow graph (blocks split at labels and branches, a
back edge is a branch to a block that dominates it). For each entry it prints one line:
  entry <name> loops <n> in-loop-div64 <d> outer-loop-div64 <l> outside-div64 <o> v4-ld <a> v4-st <b>
  shfl-bfly <s>
where div64 counts 64-bit divisions and remainders (div/rem .s64/.u64 and the __cuda_sm20_div/rem calls):
in-loop those in an inner loop (no loop inside it: a loop along a row), outer-loop those whose innermost
loop has loops inside it (a warp's loop over its points, once per point), outside the rest.
"""
import re
import sys

DIV64 = re.compile(r"\b(div|rem)\.(s|u)64\b|__cuda_sm20_(div|rem)")


def blocks_of(lines):
    """Basic blocks (start at a label or after a branch) as (first, last) line ranges, and each one's successors."""
    starts = [0]
    for i, line in enumerate(lines):
        if re.match(r"^\$L__\w+:", line) and i != starts[-1]:
            starts.append(i)
        elif re.search(r"\bbra(?:\.uni)?\s", line) and i + 1 < len(lines):
            starts.append(i + 1)
    starts = sorted(set(starts))
    ranges = [(s, (starts[n + 1] if n + 1 < len(starts) else len(lines)) - 1) for n, s in enumerate(starts)]
    label_block = {}
    for b, (s, _) in enumerate(ranges):
        m = re.match(r"^(\$L__\w+):", lines[s])
        if m:
            label_block[m.group(1)] = b
    succs = []
    for b, (s, e) in enumerate(ranges):
        out = set()
        body = [l for l in lines[s:e + 1] if l.strip()]
        last = body[-1] if body else ""
        for l in lines[s:e + 1]:
            m = re.search(r"\bbra(?:\.uni)?\s+(\$L__\w+);", l)
            if m and m.group(1) in label_block:
                out.add(label_block[m.group(1)])
        unconditional = re.match(r"^\s*bra(?:\.uni)?\s", last) or re.match(r"^\s*(ret|exit);", last)
        if not unconditional and b + 1 < len(ranges):
            out.add(b + 1)
        succs.append(out)
    return ranges, succs


def natural_loops(succs):
    """The natural loops (sets of blocks), one per header: back edges are edges to a dominator."""
    n = len(succs)
    preds = [set() for _ in range(n)]
    for b, out in enumerate(succs):
        for t in out:
            preds[t].add(b)
    dom = [set(range(n)) for _ in range(n)]
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for b in range(1, n):
            new = set(range(n))
            for p in preds[b]:
                new &= dom[p]
            new = (new if preds[b] else set()) | {b}
            if new != dom[b]:
                dom[b], changed = new, True
    loops = {}
    for u, out in enumerate(succs):
        for h in out:
            if h in dom[u]:
                body, work = {h, u}, ([u] if u != h else [])
                while work:
                    x = work.pop()
                    for p in preds[x]:
                        if p not in body:
                            body.add(p)
                            work.append(p)
                loops.setdefault(h, set()).update(body)
    return list(loops.values())


def summarize(lines):
    ranges, succs = blocks_of(lines)
    loops = natural_loops(succs)
    block_of = {}
    for b, (s, e) in enumerate(ranges):
        for i in range(s, e + 1):
            block_of[i] = b
    def innermost(i):
        around = [body for body in loops if block_of[i] in body]
        return min(around, key=len) if around else None
    def has_inner(body):
        return any(other < body for other in loops)
    divs = [innermost(i) for i, l in enumerate(lines) if DIV64.search(l)]
    div_in = sum(1 for r in divs if r is not None and not has_inner(r))
    div_outer = sum(1 for r in divs if r is not None and has_inner(r))
    div_out = sum(1 for r in divs if r is None)
    def count(pattern):
        return sum(1 for l in lines if re.search(pattern, l))
    v4_ld = count(r"ld\.global(\.\w+)*\.v4\.")
    v4_st = count(r"st\.global(\.\w+)*\.v4\.")
    shfl = count(r"shfl\.sync\.bfly")
    return (f"loops {len(loops)} in-loop-div64 {div_in} outer-loop-div64 {div_outer} outside-div64 {div_out} "
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
