"""How often an idle CPU's tick ran in a 6.12 guest (sisutil9's trace): per idle
interval, the jiffy boundaries it spans (HZ=250) against the idle balances its
tick made (`sched_balance_rq` with CPU_IDLE on that CPU):

  python idle_ticks.py TRACE.txt.gz
"""
import gzip
import re
import sys
from collections import Counter

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+(\d+\.\d+):\s+(\w+):\s*(.*)$")
KV = re.compile(r"(\w+)=(\S+)")
TICK_MS = 4.0

idle_since, balances, table = {}, Counter(), Counter()
with gzip.open(sys.argv[1], "rt", errors="replace") as f:
    for line in f:
        m = LINE.match(line)
        if not m:
            continue
        _comm, _pid, cpu, _flags, ts, ev, rest = m.groups()
        cpu, t, kv = int(cpu), float(ts) * 1e3, dict(KV.findall(rest))
        if ev == "sched_switch":
            if kv["next_pid"] == "0":
                idle_since[cpu], balances[cpu] = t, 0
            elif cpu in idle_since:
                t0 = idle_since.pop(cpu)
                table[(min(int(t // TICK_MS) - int(t0 // TICK_MS), 4), min(balances[cpu], 4))] += 1
        elif ev == "lb" and kv["w"] == "2" and kv["idle"] == "1" and cpu in idle_since:
            balances[cpu] += 1
print("| jiffy boundaries in the idle interval | idle balances: 0 | 1 | 2 | 3 | 4+ |")
print("|---|---|---|---|---|---|")
for j in range(5):
    print(f"| {j if j < 4 else '4+'} | " + " | ".join(str(table[(j, b)]) for b in range(5)) + " |")
