"""The table of docs/capture.md's "Filtering in the kernel" from the lines
scripts/capture_cost.sh printed (`round R MODE ops/s OPS events ...`).

    python3 scripts/capture_cost_table.py SECONDS LOG...

SECONDS: capture_cost.sh's first argument (stress-ng ran SECONDS + 2). Per
run: the cost is 1 - ops/s over the same round's `alone`; the CPU time the
workload lost (its 2 busy CPUs' time at alone's rate, less what it did) over
the events written (tracefs: entries and overruns; BPF: the programs' runs,
counted by the filter and ring variants; `capture`: read and lost) gives the
ns an event cost. Modes without an event count (bpf-empty, bpf-eswitch) use
bpf-filter's events per op of the same round (the same tracepoints fire);
tracefs's filters aimed at another cgroup (tfilter-other, eventpid-other),
which write none, nocmd's (the same events offered).
"""
import re
import sys
from collections import defaultdict

LINE = re.compile(r"^round (\d+) (\S+) ops/s ([\d.]+) events ?(.*)$")


def events_of(mode, rest):
    if mode.startswith("bpf-"):
        m = re.search(r"seen (\d+) kept (\d+) read (\d+) lost (\d+)", rest)
        if not m or mode in ("bpf-empty", "bpf-eswitch"):
            return None, 0
        return int(m[1]), int(m[4])
    if mode == "capture":
        m = re.match(r"(\d+)", rest)
        lost = re.search(r"lost_events = (\d+)", rest)
        return (int(m[1]) if m else None), (int(lost[1]) if lost else 0)
    m = re.match(r"(\d+)", rest)
    return (int(m[1]) if m else None), 0


def main():
    seconds = float(sys.argv[1]) + 2
    runs = defaultdict(dict)
    for path in sys.argv[2:]:
        for line in open(path):
            m = LINE.match(line.strip())
            if m:
                runs[(path, int(m[1]))][m[2]] = (float(m[3]),) + events_of(m[2], m[4])
    rows = defaultdict(list)
    for (path, _), modes in runs.items():
        alone = modes.get("alone")
        if not alone:
            continue
        def per_op_of(mode):
            if mode in modes and modes[mode][1]:
                ops, ev, _ = modes[mode]
                return ev / (ops * seconds)
            return None
        offered = {"bpf-empty": per_op_of("bpf-filter"), "tfilter-other": per_op_of("nocmd"), "eventpid-other": per_op_of("nocmd")}
        for mode, (ops, ev, lost) in modes.items():
            if mode == "capture" and ev is None:
                continue  # the capture failed (its line says why: `failed rc N: throttlelab: error: ...`)
            if mode == "alone":
                rows[mode].append((ops, None, None, None, 0))
                continue
            cost = 1 - ops / alone[0]
            lost_cpu_ns = 2 * seconds * 1e9 * cost
            if not ev and offered.get(mode):
                ev = offered[mode] * ops * seconds
            ns = lost_cpu_ns / ev if ev else None
            rows[mode].append((ops, cost, ev / (ops * seconds) if ev else None, ns, lost))
    print("| mode | ops/s | cost | events per op | ns per event | events lost |")
    print("|---|---|---|---|---|---|")
    span = lambda xs, f: "-".join(f(x) for x in (min(xs), max(xs))) if xs else ""
    for mode, rs in rows.items():
        ops = ", ".join(f"{r[0]:,.0f}".replace(",", " ") for r in rs)
        costs = [r[1] * 100 for r in rs if r[1] is not None]
        per = [r[2] for r in rs if r[2] is not None]
        ns = [r[3] for r in rs if r[3] is not None]
        lost = [r[4] for r in rs]
        print(f"| {mode} | {ops} | {span(costs, lambda x: f'{x:.1f} %')} | {span(per, lambda x: f'{x:.1f}')} "
              f"| {span(ns, lambda x: f'{x:.0f}')} | {span(lost, lambda x: f'{x:,}'.replace(',', ' '))} |")


main()
