"""ddq12: the guest's tick, from a guest_trace.py trace taken with
DDQ12_EVENTS=timer/hrtimer_expire_entry: per CPU, the gaps between
consecutive `tick_nohz_handler` expiries while a worker ran (ms; HZ=250 is 4 ms).
  python tick_gaps.py OUT/trace-1.txt.gz [...]"""
import statistics as st
import sys

from kernel_counts import events

for path in sys.argv[1:]:
    last, gaps, running = {}, [], {}
    for comm, pid, cpu, t, ev, kv, rest in events(path):
        if ev == "sched_switch":
            running[cpu] = kv["next_comm"].startswith("throttlelab-wor")
        elif ev == "hrtimer_expire_entry" and kv.get("function") == "tick_nohz_handler":
            if running.get(cpu) and cpu in last:
                gaps.append((t - last[cpu]) * 1e3)
            last[cpu] = t
    q = st.quantiles(gaps, n=10)
    print(f"{path}: {len(gaps)} gaps, deciles {[round(x, 1) for x in q]} ms; over 6 ms: {sum(g > 6 for g in gaps)}")
