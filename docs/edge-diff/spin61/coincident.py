"""A period timer that expires with a tick of its own CPU (6.1: both on CLOCK_MONOTONIC multiples):
whether the two ran in one interrupt (the same `now`), which ran first (trace order), and whether
the tick, and with it the timer, ran late (> 0.5 ms). Usage: coincident.py RUN.bw.txt..."""
import sys
from periods import TICK_FNS, events

for path in sys.argv[1:]:
    armed, entries = {}, []
    for i, (comm, pid, cpu, ts, kind, rest) in enumerate(events(path)):
        f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        if kind == "hrtimer_start":
            armed[f["hrtimer"]] = (f["function"], int(f["expires"]))
        elif kind == "hrtimer_expire_entry" and f["hrtimer"] in armed:
            fn, exp = armed[f["hrtimer"]]
            entries.append((i, cpu, fn, exp, int(f["now"])))
    ticks = {(cpu, exp): (i, now) for i, cpu, fn, exp, now in entries if fn in TICK_FNS}
    counts = {}
    for i, cpu, fn, exp, now in entries:
        if fn != "sched_cfs_period_timer" or (cpu, exp) not in ticks:
            continue
        ti, tnow = ticks[(cpu, exp)]
        key = ("one interrupt" if tnow == now else "two interrupts") + (", timer first" if i < ti else ", tick first") \
            + (", late" if tnow - exp > 500_000 else ", on time")
        counts[key] = counts.get(key, 0) + 1
    print(path, dict(sorted(counts.items())))
