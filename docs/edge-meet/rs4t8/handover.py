"""How a CPU passes between two workers of the group, kernel against the paired
simulator: docs/fidelity.md's "Four threads at 1.0, limited, event by event".

    python docs/edge-meet/rs4t8/handover.py HOLD/d50 docs/edge-meet/rs4t8/rs4-50-1.0.toml

Per run, after the first 0.1 s: the switches from one worker straight to
another on a CPU, split into those where the first was preempted (runnable:
it runs again before a sleep could end) and those where it went to sleep, and
the preempted one's slice before it (median, p10-p90, ms), and whether the
preemption came within 0.1 ms of the CPU's last tick (the tick's resched) or
between ticks (a wake-up's).
"""
import json
import statistics
import sys
from pathlib import Path

from throttlelab import diff

TICKS = ("tick_nohz_handler", "tick_sched_timer")


def q(xs):
    if len(xs) < 2:
        return "-"
    d = statistics.quantiles(xs, n=10)
    return f"{statistics.median(xs):.2f} ({d[0]:.2f}-{d[-1]:.2f})"


def kernel(text: str, start: int, lo: int, hi: int):
    since, last_tick, pre, slept, after_tick = {}, {}, [], 0, []
    for t, cpu, _comm, _pid, ev, f in diff.parse_lines(text):
        if ev == "hrtimer_expire_entry" and f.get("function") in TICKS:
            last_tick[cpu] = t
        if ev != "sched_switch":
            continue
        began = since.get(cpu, t)
        if f.get("next_comm") == diff.WORKER_COMM:
            since[cpu] = t
        if not (f.get("prev_comm") == diff.WORKER_COMM and f.get("next_comm") == diff.WORKER_COMM and lo <= t - start <= hi):
            continue
        if f["prev_state"].startswith("R"):
            pre.append((t - began) / 1e6)
            after_tick.append((t - last_tick.get(cpu, t)) / 1e6)
        else:
            slept += 1
    return pre, slept, after_tick


def simulator(records, lo: int, hi: int):
    cur, switches, last_tick = {}, [], {}
    slices = {}
    for r in records:
        c, t = r.get("cpu"), r["t_ns"]
        if r["kind"] == "tick":
            last_tick[c] = t
        if r["kind"] != "switch":
            continue
        tid = r.get("arg") if r["tg"] == 1 else None
        if c in cur and cur[c][0] is not None and tid is not None and tid != cur[c][0] and lo <= t <= hi:
            switches.append((cur[c][0], cur[c][1], t, (t - last_tick.get(c, t)) / 1e6))
        slices.setdefault(tid, []).append(t)
        cur[c] = (tid, t)
    pre, slept, after_tick = [], 0, []
    for tid, began, t, since_tick in switches:
        later = [x for x in slices.get(tid, []) if x > t]
        if later and later[0] - t < 18_600_000:
            pre.append((t - began) / 1e6)
            after_tick.append(since_tick)
        else:
            slept += 1
    return pre, slept, after_tick


def at_tick(after_tick) -> str:
    """Preemptions within 0.1 ms of the CPU's tick (the tick's resched) / later (a wake-up's)."""
    near = sum(x <= 0.1 for x in after_tick)
    return f"{near} / {len(after_tick) - near}"


def main(d: Path, scenario: Path) -> None:
    result = json.loads((d / "diff.json").read_text())
    text_s = scenario.read_text()
    resolved = json.loads(diff._native.validate(text_s, []))
    lo, hi = 100_000_000, round(resolved["duration_s"] * 1e9)
    for run in result["runs"]:
        n = run["run"]
        start = round(run["host"]["uptime_s"] * 1e9)
        kpre, kslept, ktick = kernel((d / f"run-{n}.bw.txt").read_text(), start, lo, hi)
        host = dict(run["host"], tick_latency_us=run["tick_latency_us"])
        _out, records = diff.paired_sim(text_s, [f"seed={n}", *diff.start_overrides(resolved, run["start_late_us"])], host, 1)
        spre, sslept, stick = simulator(records, lo, hi)
        print(f"run {n}: worker to worker, preempted / asleep: kernel {len(kpre)} / {kslept}, simulator {len(spre)} / {sslept}; "
              f"the preempted one's slice, ms: kernel {q(kpre)}, simulator {q(spre)}; preempted at a tick / between ticks: "
              f"kernel {at_tick(ktick)}, simulator {at_tick(stick)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
