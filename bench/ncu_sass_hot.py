#!/usr/bin/env python3
"""Where a kernel's warps stall, by SASS instruction: reads Nsight Compute's source page as
CSV (ncu --import R.ncu-rep --page source --csv --print-source sass, from a report with
the SourceCounters section) and prints the total warp-state samples, the N instructions
with the most samples (default 25) with their two main stall reasons where the CSV has
per-reason columns, and the samples by opcode (HMMA, LDSM, MUFU, BAR, ...).
    bench/ncu_sass_hot.py CSV [N]
Columns are found by name, case-insensitively, since they differ across ncu versions; a
CSV without an instruction column and a sample column gets one line and exit 1."""
import csv
import re
import signal
import sys


def number(text):
    # "1,234" (ncu quotes numbers and groups thousands), "", "-", "n/a" -> 0
    try:
        return float(text.replace(",", "").strip() or 0)
    except ValueError:
        return 0.0


def find(names, *tests):
    # the first column whose lower-cased name passes one of the tests, in their order
    for test in tests:
        for i, name in enumerate(names):
            if test(name):
                return i
    return None


def issued_not(n):
    return "not issued" in n or "not_issued" in n or "not-issued" in n


def reason(name):
    # "stall_long_sb", "smsp__pcsamp_warps_issue_stalled_long_scoreboard" or "Stall Long
    # Scoreboard" -> the reason; None for other columns and the not-issued variants
    n = name.lower()
    if issued_not(n):
        return None
    for prefix in ("smsp__pcsamp_warps_issue_stalled_", "stall_", "stall "):
        if n.startswith(prefix) and len(n) > len(prefix):
            return name[len(prefix):].strip()
    return None


def opcode(text):
    # "@!P0 HMMA.16816.F32.BF16 R4, ..." -> "HMMA"
    words = re.sub(r"^@\S+\s+", "", text.strip()).split()
    return words[0].split(".")[0] if words else "?"


def main(argv):
    top = argv[2] if len(argv) == 3 else "25"
    if len(argv) not in (2, 3) or not top.isdigit() or int(top) == 0:
        print("usage: ncu_sass_hot.py CSV [N]", file=sys.stderr)
        return 2
    top = int(top)
    try:
        with open(argv[1], newline="", encoding="utf-8-sig", errors="replace") as f:
            rows = [r for r in csv.reader(f) if r]
    except (OSError, csv.Error) as e:
        print(f"ncu_sass_hot: {argv[1]}: {e}")
        return 1

    # the header is the first row naming both a source column and a sample column (ncu
    # puts a "Kernel Name" row, and its own messages, before it)
    head = None
    for k, row in enumerate(rows):
        names = [c.strip().lower() for c in row]
        if any("source" in n for n in names) and any("sampl" in n for n in names):
            head = k
            break
    if head is None:
        # the widest of the first rows: the header, where there is one
        widest = max(rows[:10], key=len) if rows else []
        seen = ", ".join(c.strip() for c in widest) or "none (an empty file)"
        seen = "".join(c if c.isprintable() else "?" for c in seen)[:300]  # a binary file's too
        print(f"ncu_sass_hot: {argv[1]}: no instruction and warp-sampling columns; columns: {seen}")
        return 1
    header = [c.strip() for c in rows[head]]
    names = [c.lower() for c in header]
    # the SASS text: "Source" (the last one: with cuda,sass the SASS one follows the CUDA one)
    src = [i for i, n in enumerate(names) if n == "source"] or [i for i, n in enumerate(names) if "source" in n]
    src = src[-1]
    addr = find(names, lambda n: n == "address", lambda n: "address" in n and "space" not in n)
    samples = find(names,
                   lambda n: "warp stall sampling" in n and "all" in n,
                   lambda n: n in ("# samples", "smsp__pcsamp_sample_count"),
                   lambda n: "sampl" in n and not issued_not(n))
    unissued_col = find(names, lambda n: "sampl" in n and issued_not(n))
    reasons = [(i, reason(h)) for i, h in enumerate(header) if reason(h)]
    if samples is None:
        print(f"ncu_sass_hot: {argv[1]}: no warp-sampling column; columns: {', '.join(header)}")
        return 1

    insts = []  # (samples, address, text, {reason: samples})
    unissued = 0.0
    for row in rows[head + 1:]:
        if len(row) <= max(src, samples) or [c.strip() for c in row] == header:
            continue
        text = row[src].strip()
        where = row[addr].strip() if addr is not None and addr < len(row) else ""
        if not text or where == "-":
            continue
        why = {r: number(row[i]) for i, r in reasons if i < len(row)}
        insts.append((number(row[samples]), where, text, why))
        if unissued_col is not None and unissued_col < len(row):
            unissued += number(row[unissued_col])
    total = sum(s for s, _, _, _ in insts)
    if not insts or total <= 0:
        print(f"ncu_sass_hot: {argv[1]}: {len(insts)} instructions, no warp samples")
        return 1

    def pct(x):
        return f"{100.0 * x / total:5.1f}"

    line = f"samples: {total:,.0f} in {len(insts)} instructions"
    if unissued_col is not None:
        line += f" ({unissued:,.0f} not issued, {100.0 * unissued / total:.1f} %)"
    print(line)
    ranked = sorted((e for e in enumerate(insts) if e[1][0] > 0), key=lambda e: (-e[1][0], e[0]))[:top]
    print(f"top {len(ranked)} instructions: address, % of all samples, SASS"
          + (", main stall reasons (% of its samples)" if reasons else ""))
    for _, (s, where, text, why) in ranked:
        out = f"  {where or '-':<14} {pct(s)}  {text[:70]:<70}"
        main_reasons = sorted((e for e in why.items() if e[1] > 0), key=lambda e: (-e[1], e[0]))[:2]
        if main_reasons:
            out += "  " + ", ".join(f"{r} {100.0 * v / s:.0f}%" for r, v in main_reasons)
        print(out.rstrip())
    by_op = {}
    for s, _, text, _ in insts:
        by_op[opcode(text)] = by_op.get(opcode(text), 0.0) + s
    print("samples by opcode:")
    for op, s in sorted(by_op.items(), key=lambda e: (-e[1], e[0])):
        if s > 0:
            print(f"  {op:<10} {pct(s)} %  {s:,.0f}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head
    sys.exit(main(sys.argv))
