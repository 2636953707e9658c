"""Issue #34, 6.1 under TCG: when did the controller read cpu.stat?

For each run of a `throttlelab diff -o DIR` (DIR/diff.json, DIR/run-N.bw.txt):
the controller (comm throttlelab-rea) reads the "before" counters after the
common start (host.uptime_s) and before it next sleeps (switched out in
state S: it then waits for its workers' lines), and the "after" ones likewise
after start + duration_s. Prints by when each read was done, the workers'
on-CPU time (sched_switch) in the true window and before the "before" read,
and between the two reads, beside what cpu.stat's usage_usec said.

    python late_read.py DIR...
"""
import json
import re
import sys
from pathlib import Path

SWITCH = re.compile(r"\[(\d+)\].*?(\d+\.\d+): sched_switch: prev_comm=(\S+) prev_pid=\d+.*prev_state=(\S+) ==> next_comm=(\S+) next_pid=\d+")


def run(bw: Path, t0: float, duration_s: float) -> dict:
    on: dict[str, tuple[float, str]] = {}
    spans = []  # (start, end) of worker threads on a CPU
    sleeps = []  # times the controller went to sleep
    for line in bw.open():
        m = SWITCH.search(line)
        if not m:
            continue
        cpu, t, prev, state, nxt = m.group(1), float(m.group(2)), m.group(3), m.group(4), m.group(5)
        if cpu in on and on[cpu][1].startswith("throttlelab-wor"):
            spans.append((on[cpu][0], t))
        on[cpu] = (t, nxt)
        if prev.startswith("throttlelab-rea") and state.startswith("S"):
            sleeps.append(t)
    t1 = t0 + duration_s

    def ran(lo: float, hi: float) -> float:
        return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)

    before = min(t for t in sleeps if t >= t0)
    after = min(t for t in sleeps if t >= t1)
    return {
        "before_read_done_by_ms": round(1e3 * (before - t0), 1),
        "after_read_done_by_ms": round(1e3 * (after - t1), 1),
        "workers_ran_in_window_s": round(ran(t0, t1), 4),
        "workers_ran_before_the_before_read_ms": round(1e3 * ran(t0, before), 1),
        "workers_ran_between_the_reads_s": round(ran(before, after), 4),
    }


for d in map(Path, sys.argv[1:]):
    result = json.loads((d / "diff.json").read_text())
    for r in result["runs"]:
        row = run(d / f"run-{r['run']}.bw.txt", r["host"]["uptime_s"], 2.0)
        k = r["kernel"]
        print(f"{d.name} run {r['run']}: usage_usec {k['usage_usec'] / 1e6:.3f} s, nr_periods {k['nr_periods']}, "
              f"nr_throttled {k['nr_throttled']}; simulator {r['sim']['usage_usec'] / 1e6:.3f} s; " +
              ", ".join(f"{key} {v}" for key, v in row.items()))
