"""The guest's tick lateness, whole: from `throttlelab diff -o DIR` traces
(run-N.bw.txt[.gz], diff.json), per run, the ticks that interrupted a worker:
quantiles of their lateness, the share late by more than 0.5 ms, and how many
of those fell on both CPUs at once (the other CPU's tick late too, within
250 us: the whole guest stalled).

    python docs/edge-diff/spin612/lateness.py DIR [DIR...]
"""

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from analyse import trace_text  # noqa: E402
from throttlelab import diff  # noqa: E402

LATE_US = 500
NEAR_NS = 250_000


def worker_ticks(text: str, start_s: float, duration_s: float):
    """[(t ns from the start, cpu, lateness us)] of the run's ticks that interrupted a worker."""
    out = []
    for at, cpu, late_ns in diff.worker_ticks(text):
        t = (at + late_ns) / 1e9 - start_s
        if 0 <= t <= duration_s:
            out.append((t * 1e9, cpu, late_ns / 1e3))
    return out


def main(dirs: list[Path]) -> None:
    for d in dirs:
        result = json.loads((d / "diff.json").read_text())
        for run in result["runs"]:
            n = run["run"]
            text = trace_text(d, n)
            ticks = worker_ticks(text, run["host"]["uptime_s"], 2.0)
            lat = sorted(u for _, _, u in ticks)
            q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]  # noqa: E731
            late = [(t, c, u) for t, c, u in ticks if u > LATE_US]
            # Late on both CPUs: the other CPU has a tick late too, run within 250 us of it.
            both = [x for x in late if any(o[1] != x[1] and abs(o[0] - x[0]) < NEAR_NS for o in late)]
            late_model = diff.tick_late(diff.worker_ticks(text), 4_000_000)
            probe = run["host"].get("tick_late")
            print(f"{d.name} run {n}: diff.tick_late {late_model and {k: round(v, 3) for k, v in late_model.items()}}; "
                  f"the probe's before the run {probe and {k: round(v, 3) for k, v in probe.items()}}")
            print(f"{d.name} run {n}: {len(lat)} worker ticks; lateness us p50 {q(.5):.0f} p75 {q(.75):.0f} p90 {q(.9):.0f} "
                  f"p95 {q(.95):.0f} p99 {q(.99):.0f} max {lat[-1]:.0f}; > {LATE_US} us: {len(late)} "
                  f"({100 * len(late) / len(lat):.1f} %), median {statistics.median(u for *_, u in late) if late else 0:.0f} us, "
                  f"of them on both CPUs {len(both)}")


if __name__ == "__main__":
    main([Path(a) for a in sys.argv[1:]])
