"""rel13 (docs/fidelity.md, "6.12's releases grid, traced"): per kernel period of a
`throttlelab diff` guest run, gzipped (gzip -c run-N.bw.txt > trace-N.txt.gz): whether a
cfs_rq was throttled in it (`throttle_cfs_rq` returned 1), the workers' charged runtime
(sched_stat_runtime) and the longest gap between one CPU's tick expiries while a worker
ran (HZ=250: 4 ms; longer is a lost tick, ddq12's tick_gaps.py). Periods from the
workers' first charge to their last. Then how late the workers' sleeps ended: each
`hrtimer_wakeup` expiry (`now`) against the expiry a worker's `hrtimer_start` set, by whether the
CPU it fired on was idle (swapper) or running a task.
  python periods.py DIR/trace-N.txt.gz [...]"""
import statistics as st
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ddq12"))
from kernel_counts import events  # noqa: E402

for path in sys.argv[1:]:
    periods, running, last_tick, expires, late_us = [], {}, {}, {}, {"idle": [], "busy": []}
    for comm, pid, cpu, t, ev, kv, rest in events(path):
        if ev == "hrtimer_start" and kv.get("function") == "hrtimer_wakeup" and comm.startswith("throttlelab-wor"):
            expires[kv["hrtimer"]] = int(kv["expires"])
        elif ev == "hrtimer_expire_entry" and kv.get("hrtimer") in expires:
            late_us["idle" if comm == "<idle>" else "busy"].append((int(kv["now"]) - expires.pop(kv["hrtimer"])) / 1e3)
        if ev == "period":
            periods.append({"thr": 0, "run_ms": 0.0, "gap_ms": 0.0})
        elif not periods:
            continue
        elif ev == "throttle" and kv.get("ok") == "1":
            periods[-1]["thr"] += 1
        elif ev == "sched_stat_runtime" and kv.get("comm", "").startswith("throttlelab-wor"):
            periods[-1]["run_ms"] += int(kv["runtime"]) / 1e6
        elif ev == "sched_switch":
            running[cpu] = kv["next_comm"].startswith("throttlelab-wor")
        elif ev == "hrtimer_expire_entry" and kv.get("function") == "tick_nohz_handler":
            if running.get(cpu) and cpu in last_tick:
                periods[-1]["gap_ms"] = max(periods[-1]["gap_ms"], (t - last_tick[cpu]) * 1e3)
            last_tick[cpu] = t
    worked = [i for i, p in enumerate(periods) if p["run_ms"] > 0]
    ps = periods[worked[0] + 1:worked[-1]]  # whole periods of the run
    for name, sel in (("throttled", [p for p in ps if p["thr"]]), ("not throttled", [p for p in ps if not p["thr"]])):
        if sel:
            print(f"{path}: {name} {len(sel)}: workers' runtime median {st.median(p['run_ms'] for p in sel):.2f} ms, "
                  f"a tick gap over 6 ms in {sum(p['gap_ms'] > 6 for p in sel)}")
    for cpu_was, late in late_us.items():
        if len(late) > 1:
            print(f"{path}: sleeps ended on a {cpu_was} CPU: {len(late)}, late us deciles "
                  f"{[round(x) for x in st.quantiles(late, n=10)]}, over 1 ms: {sum(x > 1000 for x in late)}")
