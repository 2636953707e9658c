"""Each spinner's CPU time per CPU in a host `throttlelab diff -o DIR` run, from the
kernel's own charges (sched_stat_runtime):  python kernel_cpu.py DIR/run-N.bw.txt [THREADS]"""
import collections
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "probe12"))
from hosttrace import events, spinners  # noqa: E402

evs = events(sys.argv[1])
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 4
spin = set(spinners(evs, threads))
ns = collections.Counter()
for _, cpu, ev, fields, _, _ in evs:
    if ev == "sched_stat_runtime":
        pid = int(re.search(r"pid=(\d+)", fields)[1])
        if pid in spin:
            ns[(pid, cpu)] += int(re.search(r"runtime=(\d+)", fields)[1])
print({f"pid {pid} CPU {cpu}": round(v / 1e9, 3) for (pid, cpu), v in sorted(ns.items())})
