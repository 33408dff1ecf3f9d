#!/usr/bin/env python3
"""Where a training step's device time goes between operations, from the timeline that
bench/cupti_timeline.c records (kind, start ns, end ns, stream, name per line).

    bench/gpu_timeline.py TIMELINE [SKIP]

Steps are cut at the optimizer: each step ends with its AdamW launches (adamw_kernel),
so step k runs from the end of the (k-1)-th group of them to the end of the k-th. The
first SKIP steps (default 1: plans, graphs and pools built in the first) are left out.
Per step: its window on the device's clock, the operations in it, the time some
operation ran (the union of their intervals, whatever the stream) and the rest, idle;
then, over the steps kept, where idle time sits: a histogram of the gaps, the operations
that waited longest before starting (by name), and the ten longest gaps with the
operations on either side. A gap before an operation is launch latency, host work
between launches, or a host wait (the device drained, then the host queued more).
"""
import re
import sys

# Operations that may sit between two AdamW launches of one step: at least this many,
# and up to half the largest count between two launches in the whole timeline (with the
# optimizer beside the next forward, each unit's update has that forward's operations of
# a layer between it and the next: tens, where between steps there are hundreds).
GROUP_OTHERS = 8


def load(path):
    ops = []
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 5:
            continue
        kind, start, end, stream, name = parts[0], int(parts[1]), int(parts[2]), parts[3], parts[4]
        if end > start:
            ops.append((start, end, kind, stream, name))
    ops.sort()
    return ops


def short(name):
    """A readable kernel name: the identifier(s) of a mangled C++ name (_Z<len><id>...,
    _ZN<len><id>...<len><id>E...), template arguments and parameters dropped."""
    if not name.startswith("_Z"):
        return name[:70]
    pos, parts = 2, []
    nested = name.startswith("_ZN")
    if nested:
        pos = 3
    while True:
        m = re.match(r"\d+", name[pos:])
        if not m:
            break
        n = int(m.group(0))
        start = pos + m.end()
        parts.append(name[start:start + n])
        pos = start + n
        if not nested:
            break
    return "::".join(parts) if parts else name[:70]


def step_windows(ops):
    """(start, end] of each whole step: between the ends of consecutive optimizer groups,
    a group being AdamW launches with at most `limit` other operations between any two
    of them (GROUP_OTHERS, or half the most between two launches: a step has hundreds
    between its last and the next step's first)."""
    counts, others = [], 0
    for _, _, _, _, name in ops:
        if "adamw_kernel" not in name:
            others += 1
            continue
        counts.append(others)
        others = 0
    limit = max([GROUP_OTHERS] + [c // 2 for c in counts[1:]])
    ends, last, others = [], None, 0
    for start, end, _, _, name in ops:
        if "adamw_kernel" not in name:
            others += 1
            continue
        if last is not None and others > limit:
            ends.append(last)
        last, others = end, 0
    if last is not None:
        ends.append(last)
    return list(zip(ends[:-1], ends[1:]))


def analyse(ops, lo, hi):
    """(operations, busy ns, gaps [(ns, previous name, next name)]) inside (lo, hi]."""
    inside = [o for o in ops if o[0] >= lo and o[1] <= hi]
    busy, gaps = 0, []
    cover_end, prev_name = lo, "(step start)"
    for start, end, _, _, name in inside:
        if start > cover_end:
            gaps.append((start - cover_end, prev_name, name))
            busy += end - start
            cover_end = end
        elif end > cover_end:
            busy += end - cover_end
            cover_end = end
        if end >= cover_end:
            prev_name = name
    if hi > cover_end:
        gaps.append((hi - cover_end, prev_name, "(step end)"))
    return len(inside), busy, gaps


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    skip = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    ops = load(sys.argv[1])
    windows = step_windows(ops)[max(skip - 1, 0):]
    if not windows:
        sys.exit("gpu_timeline: no two groups of adamw_kernel launches: no whole step")
    all_gaps, n_total, busy_total, span_total = [], 0, 0, 0
    print("step   window ms   ops   busy ms   idle ms   idle/op us")
    for i, (lo, hi) in enumerate(windows):
        n, busy, gaps = analyse(ops, lo, hi)
        span = hi - lo
        idle = span - busy
        print(f"{i + skip + 1:4d} {span / 1e6:11.2f} {n:5d} {busy / 1e6:9.2f} {idle / 1e6:9.2f}"
              f" {idle / max(n, 1) / 1e3:11.2f}")
        all_gaps += gaps
        n_total, busy_total, span_total = n_total + n, busy_total + busy, span_total + span
    steps = len(windows)
    idle_total = span_total - busy_total
    print(f"mean: {span_total / steps / 1e6:.2f} ms a step, {n_total / steps:.0f} operations,"
          f" idle {idle_total / steps / 1e6:.2f} ms ({100 * idle_total / span_total:.1f} %)")
    bins = [(0, 2e3), (2e3, 5e3), (5e3, 10e3), (10e3, 50e3), (50e3, 1e12)]
    print("gaps by length (per step): count, idle ms")
    for a, b in bins:
        sel = [g for g in all_gaps if a <= g[0] < b]
        label = f"{a / 1e3:.0f}-{b / 1e3:.0f} us" if b < 1e12 else f">= {a / 1e3:.0f} us"
        print(f"  {label:<12} {len(sel) / steps:8.1f} {sum(g[0] for g in sel) / steps / 1e6:9.3f}")
    by_next = {}
    for ns, _, nxt in all_gaps:
        k = short(nxt)
        c, t = by_next.get(k, (0, 0))
        by_next[k] = (c + 1, t + ns)
    print("idle before each operation, by name (per step): ms, gaps")
    for k, (c, t) in sorted(by_next.items(), key=lambda x: -x[1][1])[:15]:
        print(f"  {t / steps / 1e6:8.3f} {c / steps:7.1f}  {k}")
    print("the ten longest gaps: us, before -> after")
    for ns, prev, nxt in sorted(all_gaps, reverse=True)[:10]:
        print(f"  {ns / 1e3:9.1f}  {short(prev)} -> {short(nxt)}")


if __name__ == "__main__":
    main()
