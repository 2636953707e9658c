"""What moves the probe's `se.sum_exec_runtime` off the tick grid (host, tracefs).

Runs the like-host probe (`_native.probe_host`) with a tracefs instance recording, on every CPU,
`sched_stat_runtime` (each `update_curr` of a task: each charge the probe's `tick_charges_on`
can see), the tick's `hrtimer_expire_entry`, `sched_waking`/`sched_wakeup` and `sched_switch`. For
each charge of the probe's threads in its last 0.3 s (the tick-charge window) it names what
caused it: the CPU's tick (a tick expiry on that CPU just before), a switch away (preemption),
or a wake-up on that CPU (`check_preempt_wakeup_fair` -> `update_curr`). It then prints the
probe's own `tick_late` beside the tick's real lateness.

    python docs/edge-meet/probe11/tick_charges.py [OUT.txt]
"""
import collections
import json
import os
import re
import sys

from throttlelab import _native

T = "/sys/kernel/tracing"
inst = f"{T}/instances/tickcheck-{os.getpid()}"
os.makedirs(inst)
w = lambda p, v: open(f"{inst}/{p}", "w").write(v)
try:
    w("buffer_size_kb", "32768")
    for ev in ("sched/sched_stat_runtime", "timer/hrtimer_expire_entry", "sched/sched_waking", "sched/sched_switch"):
        w(f"events/{ev}/enable", "1")
    w("tracing_on", "1")
    host = json.loads(_native.probe_host(2))
    w("tracing_on", "0")
    trace = open(f"{inst}/trace").read()
finally:
    os.rmdir(inst)

pid = os.getpid()
line = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\].*?\s([\d.]+): (\w+): (.*)$")
evs = []
for l in trace.splitlines():
    m = line.match(l)
    if m:
        evs.append((float(m[4]), int(m[3]), m[5], m[6], m[1]))
probe = lambda ev, f: ev == "sched_stat_runtime" and f"pid={pid} " not in f and " pid=" in f
charges = [t for t, cpu, ev, f, comm in evs if probe(ev, f) and comm.startswith("python")]
if not charges:
    sys.exit("no charges of the probe's threads traced")
win = max(charges) - 0.3
tick_s = 1 / int(host.get("hz") or 250)
ticks = [t for t, cpu, ev, f, comm in evs if ev == "hrtimer_expire_entry" and "tick_" in f and t > win]
# The grid's phase: the densest 0.5 ms of the ticks' offsets (as the probe finds it from charges).
offs = sorted(t % tick_s for t in ticks)
phase = max(offs, key=lambda o: sum((x - o) % tick_s < 0.0005 for x in offs))
late_of = lambda t: (t - phase) % tick_s
cause = collections.Counter()
last = collections.defaultdict(dict)
for t, cpu, ev, f, comm in evs:
    if ev == "hrtimer_expire_entry" and "tick_" in f:
        last[cpu]["tick"] = t
    elif ev == "sched_waking":
        last[int(re.search(r"target_cpu=(\d+)", f)[1])]["wake"] = t
    elif ev == "sched_switch":
        last[cpu]["switch"] = t
    if probe(ev, f) and comm.startswith("python") and t > win:
        lt = last[cpu]
        near = lambda k: k in lt and t - lt[k] < 30e-6
        kind = "tick" if near("tick") else "a wake-up targeting the CPU" if near("wake") else "other (a switch, the thread's own syscall)"
        cause[(late_of(t) > 0.0005, kind)] += 1
late_ticks = sum(late_of(t) > 0.0005 for t in ticks)
out = [f"probe: tick_late {host.get('tick_late')}, background {host.get('background_per_s'):.1f}/s x {host.get('background_us'):.0f} us",
       f"the ticks themselves in the window: {len(ticks)}, more than 0.5 ms off the grid: {late_ticks}",
       f"charges of the probe's threads in the window: {sum(cause.values())}; the probe calls a charge more than 0.5 ms off the grid late:"]
for off in (True, False):
    n = sum(v for (o, _), v in cause.items() if o == off)
    out.append(f"  {'off the grid (the probe: late ticks)' if off else 'on the grid'}: {n}")
    out += [f"    after {k}: {v}" for (o, k), v in cause.most_common() if o == off]
print("\n".join(out))
if len(sys.argv) > 1:
    open(sys.argv[1], "w").write("\n".join(out) + "\n")
