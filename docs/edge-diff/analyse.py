"""The numbers of docs/fidelity.md's "The same row on 6.12, grants visible",
from a `throttlelab diff -o DIR` directory (run-N.bw.txt or .bw.txt.gz and
diff.json) and its scenario:

    python docs/edge-diff/analyse.py docs/edge-diff/spin docs/edge-diff/spin2-30-60.toml
    python docs/edge-diff/analyse.py docs/edge-diff/host docs/edge-diff/spin2-30-60.toml

Per run: the tick's lateness (ticks that interrupted a worker, and all ticks
late by more than 0.5 ms, with those on both CPUs within 250 us: a stall),
the period timer's lateness; where the kernel's grants were probed, the
throttles whose failing ask came within 250 us of the other CPU's ask, the
grants in phase (kernel and the paired simulator), in phase within 20 ms
after a stall and otherwise, and the grants above 9 ms.
"""

import gzip
import json
import re
import statistics
import sys
from pathlib import Path

from throttlelab import diff

START = re.compile(r"hrtimer_start: hrtimer=(\S+) function=(\w+) expires=(\d+)")
ENTRY = re.compile(r"^\s*(.*)-\d+\s+.*?\[(\d+)\].*?(\d+\.\d+): hrtimer_expire_entry: hrtimer=(\S+) function=(\w+) now=(\d+)")
TICKS = ("tick_nohz_handler", "tick_sched_timer")
NEAR_NS = 250_000


def trace_text(d: Path, n: int) -> str:
    plain = d / f"run-{n}.bw.txt"
    return plain.read_text() if plain.exists() else gzip.decompress((d / f"run-{n}.bw.txt.gz").read_bytes()).decode()


def lateness(text: str, start_s: float, duration_s: float):
    """(worker ticks' lateness us, [(t ns, cpu)] of ticks > 0.5 ms late, all ticks, period timer lateness us)."""
    expires: dict[str, int] = {}
    worker, late, period = [], [], []
    n = 0
    for line in text.splitlines():
        m = START.search(line)
        if m:
            expires[m[1]] = int(m[3])
            continue
        m = ENTRY.search(line)
        if not m or m[4] not in expires:
            continue
        t = float(m[3]) - start_s
        if not 0 <= t <= duration_s:
            continue
        us = (int(m[6]) - expires[m[4]]) / 1e3
        if m[5] == "sched_cfs_period_timer":
            period.append(us)
        elif m[5] in TICKS:
            n += 1
            if m[1].strip().startswith(diff.WORKER_COMM):
                worker.append(us)
            if us > 500:
                late.append((t * 1e9, int(m[2])))
    return worker, late, n, period


def in_phase(e, events) -> bool:
    return any(o.cpu != e.cpu and abs(o.t_ns - e.t_ns) <= NEAR_NS for o in events)


def main(d: Path, scenario: Path) -> None:
    result = json.loads((d / "diff.json").read_text())
    text_scenario = scenario.read_text()
    resolved = json.loads(diff._native.validate(text_scenario, []))
    period_ns = resolved["cgroups"][0]["period_us"] * 1000
    duration_s = resolved["duration_s"]
    for run in result["runs"]:
        n = run["run"]
        text = trace_text(d, n)
        start_s = run["host"]["uptime_s"]
        worker, late, n_ticks, period = lateness(text, start_s, duration_s)
        stalls = [t for t, c in late if any(c2 != c and abs(t2 - t) < NEAR_NS for t2, c2 in late)]
        print(f"run {n}: worker ticks {len(worker)}, lateness median {statistics.median(worker):.0f} us; "
              f"ticks > 0.5 ms late {len(late)} of {n_ticks}, on both CPUs at once {len(stalls)}; "
              f"period timer: median {statistics.median(period):.0f} us, max {max(period):.0f} us")
        if "assign" not in run["kinds"]:
            print("  no grants probed")
            continue
        start_ns = round(start_s * 1e9)
        kernel = diff.kernel_stream(text, start_ns, start_ns + round(duration_s * 1e9), period_ns)
        host = dict(run["host"])
        host.pop("vm", None)
        host["tick_latency_us"] = run["tick_latency_us"]
        _out, records = diff.paired_sim(text_scenario, [f"seed={n}"], host, 1)
        sim = diff.sim_stream(records, 1)
        # Asks after the first period (the start's own asks aside); the 1 ns asks of throttle_cfs_rq aside.
        asks = [e for e in kernel.events if e.kind == "assign" and e.t_ns > period_ns and e.amount_ns != 1]
        failing = []
        for t in (e for e in kernel.events if e.kind == "throttle"):
            before = [e for e in asks if e.cpu == t.cpu and t.t_ns - 3_000_000 <= e.t_ns <= t.t_ns]
            if before:
                failing.append(in_phase(before[0], asks))
        print(f"  throttles whose failing ask was in phase with the other CPU's: {sum(failing)} of {len(failing)}")
        for name, stream in (("kernel", kernel), ("simulator", sim)):
            grants = [e for e in stream.events if e.kind == "assign" and e.amount_ns and e.t_ns > period_ns]
            phase = sum(in_phase(e, grants) for e in grants)
            big = sum(e.amount_ns > 9_000_000 for e in grants)
            print(f"  {name}: grants {len(grants)}, in phase {phase}, above 9 ms {big}")
        grants = [e for e in asks if e.amount_ns]
        after = [in_phase(e, asks) for e in grants if any(0 <= e.t_ns - s <= 20_000_000 for s in stalls)]
        rest = [in_phase(e, asks) for e in grants if not any(0 <= e.t_ns - s <= 20_000_000 for s in stalls)]
        print(f"  kernel grants in phase within 20 ms after a stall: {sum(after)} of {len(after)}; otherwise {sum(rest)} of {len(rest)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
