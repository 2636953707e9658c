"""What each side's group asks for, per kernel run: docs/fidelity.md's "Four
threads at 1.0, limited, event by event".

    python docs/edge-meet/rs4t8/speed.py HOLD

HOLD is hold.sh's output (d50/, d100/). Per kernel run: the CPU charged per
10 ms run phase (`sched_stat_runtime` summed from a worker's wake-up to its
sleep, after the first 0.2 s) against 10 ms / the probe's work_speed (what a
simulated run costs); the run phases each side completed (usage / the cost
of a run) and its usage as a share of the quota; then the paired simulator's
throttled periods (seed N, then seeds 11-14) with the probe's work_speed and
with 10 ms / the run's own cost.
"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from throttlelab import diff

SEEDS = (11, 12, 13, 14)


def run_cost_ms(text: str, start: int, duration_ns: int) -> float:
    """The mean CPU charged to a worker's run phase (ms)."""
    acc: dict[int, int] = defaultdict(int)
    phases = []
    for t, _cpu, _comm, _pid, ev, f in diff.parse_lines(text):
        if not start <= t <= start + duration_ns:
            continue
        if ev == "sched_stat_runtime" and f.get("comm") == diff.WORKER_COMM:
            acc[int(f["pid"])] += int(f["runtime"])
        elif ev == "sched_switch" and f.get("prev_comm") == diff.WORKER_COMM and not f["prev_state"].startswith("R"):
            pid = int(f["prev_pid"])
            if acc[pid] > 0 and t - start > 200_000_000:
                phases.append(acc[pid])
            acc[pid] = 0
    return statistics.mean(phases) / 1e6


def main(hold: Path) -> None:
    here = Path(__file__).resolve().parent
    for d in ("d50", "d100"):
        result = json.loads((hold / d / "diff.json").read_text())
        text_s = (here / f"rs4-{d[1:]}-1.0.toml").read_text()
        resolved = json.loads(diff._native.validate(text_s, []))
        duration_ns = round(resolved["duration_s"] * 1e9)
        quota_s = resolved["cgroups"][0]["quota_us"] / 1e6 * resolved["duration_s"] * 1e6 / resolved["cgroups"][0]["period_us"]
        for run in result["runs"]:
            n = run["run"]
            start = round(run["host"]["uptime_s"] * 1e9)
            cost = run_cost_ms((hold / d / f"run-{n}.bw.txt").read_text(), start, duration_ns)
            host = dict(run["host"], tick_latency_us=run["tick_latency_us"])
            starts = diff.start_overrides(resolved, run["start_late_us"])
            sim_cost = 10 / host["work_speed"]
            k_use, s_use = run["kernel"]["usage_usec"] / 1e6, run["sim"]["usage_usec"] / 1e6
            said = []
            for ws in (host["work_speed"], 10 / cost):
                h = dict(host, work_speed=ws)
                thr = [diff.paired_sim(text_s, [f"seed={seed}", *starts], h, 1)[0]["cgroups"]["app"]["nr_throttled"] for seed in (n, *SEEDS)]
                said.append(f"{ws:.4f}: {', '.join(map(str, thr))}")
            print(f"{d[1:]} ms run {n}: a run costs {cost:.3f} ms, simulated {sim_cost:.3f} ({100 * (sim_cost / cost - 1):+.1f} %); "
                  f"run phases kernel {1000 * k_use / cost:.0f}, simulator {1000 * s_use / sim_cost:.0f}; usage / quota "
                  f"{k_use / quota_s:.3f} / {s_use / quota_s:.3f}; throttled periods kernel {run['kernel']['nr_throttled']}, "
                  f"simulator with the probe's speed {said[0]}, with the run's {said[1]}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
