"""A 6.1/6.12 guest's bandwidth trace (`throttlelab diff -o DIR`, DIR/run-N.bw.txt), period by period:
the period timer's expiry against its programmed time, the CPU it ran on, each throttle's and
unthrottle's time and CPU, the ticks' lateness on the worker's CPU. Usage: periods.py RUN.bw.txt..."""
import re, statistics, sys

#: The tick's hrtimer function: 6.1's, and 6.12's.
TICK_FNS = ("tick_sched_timer", "tick_nohz_handler")
LINE = re.compile(r"^\s*(\S.*?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\w+):\s*(.*)$")

def events(path):
    for line in open(path):
        if line.startswith("#"):
            continue
        m = LINE.match(line)
        if m:
            comm, pid, cpu, ts, kind, rest = m.groups()
            yield comm, int(pid), int(cpu), float(ts), kind, rest

def timers(path):
    """The trace's ticks, {(cpu, programmed ns): (ran ns, interrupted a worker)}; the period timer's
    expiries, [(programmed ns, ran ns, cpu)]; and the throttles, [(ns, cpu)]."""
    armed, ticks, expiries, throttles = {}, {}, [], []
    for comm, pid, cpu, ts, kind, rest in events(path):
        f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        if kind == "hrtimer_start":
            armed[f["hrtimer"]] = (f["function"], int(f["expires"]))
        elif kind == "hrtimer_expire_entry" and f["hrtimer"] in armed:
            fn, exp = armed[f["hrtimer"]]
            if fn in TICK_FNS:
                ticks[(cpu, exp)] = (int(f["now"]), comm.startswith("throttlelab-wor"))
            elif fn == "sched_cfs_period_timer":
                expiries.append((exp, int(f["now"]), cpu))
        elif kind == "throttle" and rest.endswith("ok=1"):
            throttles.append((int(round(ts * 1e9)), cpu))
    return ticks, expiries, throttles

def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")

def summary(path):
    armed = {}            # hrtimer -> (function, expires s)
    period_late, tick_late = [], {0: [], 1: []}
    expiries, throttles, unthrottles, distributes = [], [], [], []
    worker_cpu_time = {0: 0, 1: 0}
    last_switch = {}
    for comm, pid, cpu, ts, kind, rest in events(path):
        if kind == "hrtimer_start":
            f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
            armed[f["hrtimer"]] = (f["function"], int(f["expires"]) / 1e9)
        elif kind == "hrtimer_expire_entry":
            f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
            fn, exp = armed.get(f["hrtimer"], (f.get("function"), None))
            now = int(f["now"]) / 1e9
            if exp is None:
                continue
            if fn == "sched_cfs_period_timer":
                period_late.append((now - exp) * 1e3)
                expiries.append((now, cpu, (now - exp) * 1e3))
            elif fn in TICK_FNS and comm.startswith("throttlelab-wor"):
                tick_late[cpu].append((now - exp) * 1e3)
        elif kind == "throttle" and rest.endswith("ok=1"):
            throttles.append((ts, cpu))
        elif kind == "unthrottle":
            unthrottles.append((ts, cpu))
        elif kind == "distribute":
            distributes.append((ts, cpu))
        elif kind == "sched_switch":
            f = re.search(r"next_comm=(\S+)", rest)
            if cpu in last_switch and last_switch[cpu][1]:
                worker_cpu_time[cpu] += ts - last_switch[cpu][0]
            last_switch[cpu] = (ts, f and f.group(1).startswith("throttlelab-wor"))
    # Each throttle: how long to the next unthrottle, and where the refill came relative to it.
    lengths, to_expiry, throttle_before_expiry = [], [], []
    for t, cpu in throttles:
        u = next((u for u, _ in unthrottles if u > t), None)
        e = next((e for e in expiries if e[0] > t), None)
        if u is not None:
            lengths.append((u - t) * 1e3)
        if e is not None:
            # Where the throttle fell in its period: the expiry's programmed time less the throttle.
            throttle_before_expiry.append((e[0] - e[2] / 1e3 - t) * 1e3)
    print(f"{path}:")
    print(f"  period timer: {len(expiries)} expiries, CPUs {sorted(set(c for _, c, _ in expiries))}; "
          f"late (now - programmed) ms: p10 {q(period_late, .1):.3f} median {q(period_late, .5):.3f} p90 {q(period_late, .9):.3f} "
          f"mean {statistics.fmean(period_late):.3f}; > 0.5 ms: {sum(l > .5 for l in period_late)}")
    late_at_throttle = [e[2] for t, _ in throttles for e in [next((e for e in expiries if e[0] > t), None)] if e]
    print(f"  throttles {len(throttles)} on CPUs {sorted(set(c for _, c in throttles))}; unthrottles {len(unthrottles)} on CPUs "
          f"{sorted(set(c for _, c in unthrottles))}; distribute on CPUs {sorted(set(c for _, c in distributes))}")
    print(f"  throttle -> unthrottle ms: median {q(lengths, .5):.3f} mean {statistics.fmean(lengths):.3f} (sum {sum(lengths):.1f})")
    print(f"    of which throttle -> programmed expiry: median {q(throttle_before_expiry, .5):.3f} mean {statistics.fmean(throttle_before_expiry):.3f}; "
          f"the expiry's lateness: median {q(late_at_throttle, .5):.3f} mean {statistics.fmean(late_at_throttle):.3f}")
    for cpu, ls in tick_late.items():
        if ls:
            print(f"  worker's ticks on CPU {cpu}: {len(ls)}, late ms median {q(ls, .5):.3f} p90 {q(ls, .9):.3f}; > 0.5 ms: {sum(l > .5 for l in ls)} "
                  f"({100 * sum(l > .5 for l in ls) / len(ls):.1f} %), their median {q([l for l in ls if l > .5], .5):.3f}")
    # The throttle's place in the period, in ms before the programmed expiry, as a histogram of 1 ms bins.
    bins = {}
    for x in throttle_before_expiry:
        bins[int(x)] = bins.get(int(x), 0) + 1
    print("  throttle, ms before the programmed expiry (1 ms bins):", dict(sorted(bins.items())))
    return lengths, period_late

if __name__ == "__main__":
    for p in sys.argv[1:]:
        summary(p)
