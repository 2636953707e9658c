"""Latencies in a guest's trace (`diff -o`, run-N.bw.txt): a tick's interrupt entry to the throttle it led to
on that CPU, and the period timer's entry to `distribute_cfs_runtime`. Usage: latency.py RUN.bw.txt..."""
import sys
sys.path.insert(0, __import__('os').path.dirname(__file__))
from periods import TICK_FNS, events, q
for path in sys.argv[1:]:
    last_tick = {}; lat = []; ref_lat = []; armed = {}
    last_period = {}
    for comm, pid, cpu, ts, kind, rest in events(path):
        f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        if kind == "hrtimer_start":
            armed[f["hrtimer"]] = f["function"]
        if kind == "hrtimer_expire_entry" and armed.get(f.get("hrtimer")) in TICK_FNS:
            last_tick[cpu] = ts
        if kind == "hrtimer_expire_entry" and armed.get(f.get("hrtimer")) == "sched_cfs_period_timer":
            last_period[cpu] = ts
        if kind == "throttle" and rest.endswith("ok=1") and cpu in last_tick:
            lat.append((ts - last_tick[cpu]) * 1e6)
        if kind == "refill" and "sched_cfs_period_timer" in rest or (kind == "distribute" and cpu in last_period):
            ref_lat.append((ts - last_period[cpu]) * 1e6)
    print(path, "tick entry -> throttle us p10/median/p90", [round(q(lat, p)) if lat else None for p in (.1, .5, .9)], len(lat),
          "| period timer entry -> distribute us", [round(q(ref_lat, p)) if ref_lat else None for p in (.1, .5, .9)], len(ref_lat))
