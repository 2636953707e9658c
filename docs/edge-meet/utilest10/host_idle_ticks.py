"""The host's (6.18) idle CPUs' ticks, from a tracefs instance's sched_switch and
`tick_nohz_handler` expiries recorded around `throttlelab real` (no kprobes on
the host, so no balance or hint is seen; host_idle_ticks.sh records it):

  python host_idle_ticks.py TRACE.txt

Per idle interval, the jiffy boundaries it spans (HZ=250, ticks aligned) against
the ticks that ran in it.
"""
import re
import sys
from collections import Counter

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+(\d+\.\d+):\s+(\w+):\s*(.*)$")
idle_since, ticks, table = {}, Counter(), Counter()
for line in open(sys.argv[1]):
    m = LINE.match(line)
    if not m:
        continue
    _comm, _pid, cpu, _flags, ts, ev, rest = m.groups()
    cpu, t = int(cpu), float(ts) * 1e3
    if ev == "sched_switch":
        if re.search(r"next_pid=(\d+)", rest).group(1) == "0":
            idle_since[cpu], ticks[cpu] = t, 0
        elif cpu in idle_since:
            t0 = idle_since.pop(cpu)
            table[(min(int(t // 4) - int(t0 // 4), 4), min(ticks[cpu], 4))] += 1
    elif ev == "hrtimer_expire_entry" and "tick_nohz_handler" in rest and cpu in idle_since:
        ticks[cpu] += 1
print("| jiffy boundaries in the idle interval | ticks in it: 0 | 1 | 2 | 3 | 4+ |")
print("|---|---|---|---|---|---|")
for j in range(5):
    print(f"| {j if j < 4 else '4+'} | " + " | ".join(str(table[(j, b)]) for b in range(5)) + " |")
