"""Summarise a trace.sh trace: how the workers' run phases meet and why.

python analyse_trace.py OUT.trace [--from-s 0.5] -> a text summary on stdout.
Workers: the threads whose comm starts with the worker's (the busiest comm's
threads). A run phase lasts from a thread's wake-up to its switch-out asleep.
"""
import re
import sys
from collections import Counter, defaultdict

LINE = re.compile(r"^\s*(.{16})-(\d+)\s+\[(\d+)\]\s+(\S+)\s+([\d.]+):\s+(\w+):\s+(.*)$")
KV = re.compile(r"(\w+)=(\S+)")


def raw_events(path):
    """(us, cpu, logging comm, logging pid, irq flags, event, fields) per line."""
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if m:
            comm, pid, cpu, flags, ts, name, rest = m.groups()
            yield float(ts) * 1e6, int(cpu), comm.strip(), int(pid), flags, name, rest


def events(path):
    for ts, cpu, _, pid, _, name, rest in raw_events(path):
        yield ts, cpu, pid, name, rest


def switch_fields(rest):
    a, b = rest.split(" ==> ")
    fa, fb = dict(KV.findall(a)), dict(KV.findall(b))
    return int(fa["prev_pid"]), fa["prev_state"], int(fb["next_pid"]), fb["next_comm"], fa["prev_comm"]


def cpu_time(evs):
    """Each pid's CPU time (us) from the switches, and each pid's comm."""
    cpu_by_pid, comm_of, on = Counter(), {}, {}
    for ts, cpu, pid, name, rest in evs:
        if name == "sched_switch":
            prev, _, nxt, ncomm, pcomm = switch_fields(rest)
            comm_of[nxt], comm_of[prev] = ncomm, pcomm
            if cpu in on:
                cpu_by_pid[on[cpu][0]] += ts - on[cpu][1]
            on[cpu] = (nxt, ts)
    return cpu_by_pid, comm_of


def main():
    path = sys.argv[1]
    evs = list(events(path))
    # The workers: the comm with the most CPU time among switched-in threads.
    cpu_by_pid, comm_of = cpu_time(evs)
    by_comm = Counter()
    for p, t in cpu_by_pid.items():
        if p:
            by_comm[comm_of.get(p, "?")] += t
    # The real backend's worker threads (comm cut to 15 characters), else the busiest comm.
    wcomm = "throttlelab-wor" if "throttlelab-wor" in by_comm else by_comm.most_common(1)[0][0]
    workers = sorted(p for p, t in cpu_by_pid.items() if comm_of.get(p) == wcomm and t > 1e5)
    W = set(workers)
    print(f"workers: comm {wcomm}, {len(workers)} threads {workers}")
    # Per worker: phase state machine.
    state = {p: None for p in W}  # None, 'run', 'sleep'
    phase = {}  # p -> dict(wake, cpu_us, slices, wait_us, last_in/out)
    runq_since = {}  # p -> ts when it became runnable and not running
    running = {}  # cpu -> pid
    phases = defaultdict(list)
    sleep_at = {}
    sleeps = defaultdict(list)
    timers = {}  # hrtimer -> (pid, expires_ns)
    late = []
    tick_at = defaultdict(float)  # cpu -> last tick ts
    waking_at = {}  # pid -> (ts, cpu)
    preempt = Counter()
    migr = Counter()
    wake_cpu = Counter()
    pending = {}  # a worker woken onto a CPU another worker runs on
    outcome = defaultdict(list)
    rq_of = {}  # a worker's runqueue's CPU
    wait_by = Counter()  # us waited runnable, by what its CPU and the other did
    last_ts = None
    t_from = None
    woke_once = set()
    for ts, cpu, pid, name, rest in evs:
        if last_ts is not None and t_from is not None and ts > t_from:
            dt = ts - max(last_ts, t_from)
            for q_ in runq_since:
                c = rq_of.get(q_)
                if c is None or dt <= 0:
                    continue
                on = running.get(c, 0)
                what = "behind another worker" if on in W else ("behind another task" if on else "its CPU idle")
                if on == 0 and dt > 1000 and "--debug" in sys.argv:
                    print("idle wait", q_, c, ts, dt, running)
                other = [running.get(o, 0) for o in (0, 1) if o != c]
                what += ", the other CPU idle" if other and other[0] == 0 else ""
                wait_by[what] += dt
        last_ts = ts
        f = dict(KV.findall(rest)) if name != "sched_switch" else None
        if name == "hrtimer_expire_entry":
            if "tick" in f.get("function", ""):
                tick_at[cpu] = ts
            h = f["hrtimer"]
            if h in timers:
                p, exp = timers.pop(h)
                late.append(int(f["now"]) - exp)
        elif name == "hrtimer_start" and pid in W and "hrtimer_wakeup" in f.get("function", ""):
            timers[f["hrtimer"]] = (pid, int(f["expires"]))
        elif name == "sched_waking" and int(f["pid"]) in W:
            waking_at[int(f["pid"])] = (ts, cpu)
        elif name == "sched_wakeup" and int(f["pid"]) in W:
            p = int(f["pid"])
            tgt = int(f["target_cpu"])
            rq_of[p] = tgt
            woke_once.add(p)
            if t_from is None and woke_once == W:
                t_from = ts + 0.5e6  # the run's start, when every worker has woken, plus 0.5 s
            wts, wcpu = waking_at.get(p, (ts, cpu))
            both_busy = all(running.get(c, 0) != 0 for c in (0, 1))
            wake_cpu[("prev CPU idle" if running.get(tgt, 0) == 0 else "target busy") + (", both busy" if both_busy else "")] += 1
            if p in sleep_at:
                sleeps[p].append(wts - sleep_at.pop(p))
            phase[p] = dict(wake=ts, cpu_us=0.0, slices=0, wait_us=0.0, preempted=0, busy_at_wake=both_busy)
            victim = running.get(tgt, 0)
            if victim in W:
                pending[p] = dict(wake=ts, cpu=tgt, victim=victim, since_tick=ts - tick_at[tgt])
            runq_since[p] = ts
            state[p] = "run"
            if running.get(tgt, 0) == 0:
                # Woken onto an idle CPU: it runs at once. (This host's trace
                # often lacks the idle task's switch to it.)
                running[tgt] = p
                phase[p]["ins"] = ts
                phase[p]["slices"] += 1
                runq_since.pop(p, None)
        elif name == "sched_migrate_task" and int(f["pid"]) in W:
            p = int(f["pid"])
            rq_of[p] = int(f["dest_cpu"])
            kind = "at wake-up" if p in runq_since and runq_since[p] == phase.get(p, {}).get("wake") and ts - waking_at.get(p, (0,))[0] < 50 else "balance"
            migr[kind] += 1
        elif name == "sched_switch":
            prev, pstate, nxt, _, _ = switch_fields(rest)
            if prev in W and prev in phase and "ins" in phase[prev]:
                ph = phase[prev]
                ph["cpu_us"] += ts - ph.pop("ins")
                if pstate.startswith("R"):
                    ph["preempted"] += 1
                    runq_since[prev] = ts
                    woke = [q for q in W if q == nxt and abs(phase.get(q, {}).get("wake", -1e9) - ts) < 100]
                    cause = "a waking worker took the CPU at its wake-up" if woke else (
                        "at a tick (a worker next)" if ts - tick_at[cpu] < 30 and nxt in W else (
                            "other task" if nxt not in W else "other (a worker next)"))
                    preempt[cause] += 1
                else:
                    ph["wall_us"] = ts - ph["wake"]
                    phases[prev].append(ph)
                    del phase[prev]
                    sleep_at[prev] = ts
            if nxt in pending:
                w = pending.pop(nxt)
                if cpu != w["cpu"] or prev != w["victim"]:
                    kind = "ran after another switch"
                elif not pstate.startswith("R"):
                    kind = "waited for the worker's end"
                elif ts - w["wake"] < 100:
                    kind = "preempted it at the wake-up"
                elif ts - tick_at[cpu] < 30:
                    kind = "preempted it at a tick"
                else:
                    kind = "preempted it otherwise"
                outcome[kind].append((ts - w["wake"], w["since_tick"], w["wake"]))
            running[cpu] = nxt
            if nxt in W and nxt in phase and "ins" not in phase[nxt]:
                ph = phase[nxt]
                ph["ins"] = ts
                ph["slices"] += 1
                ph["wait_us"] += ts - runq_since.pop(nxt, ts)
    skip = float(sys.argv[sys.argv.index("--from-s") + 1]) if "--from-s" in sys.argv else 0.5
    t0 = min(ph["wake"] for p in W for ph in phases[p])
    sel = [ph for p in W for ph in phases[p] if ph["wake"] > t0 + skip * 1e6]
    n = len(sel)
    import statistics as st
    def q(xs):
        xs = sorted(xs)
        return f"min {xs[0]:.0f} p10 {xs[len(xs)//10]:.0f} median {st.median(xs):.0f} p90 {xs[9*len(xs)//10]:.0f} max {xs[-1]:.0f}"
    print(f"run phases after the first {skip} s: {n}")
    print(f"  CPU time per run phase, us: {q([p['cpu_us'] for p in sel])}")
    print(f"  wall time per run phase, us: {q([p['wall_us'] for p in sel])}")
    print(f"  waited runnable, us: {q([p['wait_us'] for p in sel])}; total {sum(p['wait_us'] for p in sel)/1e3:.1f} ms")
    met = [p for p in sel if p["wait_us"] > 50]
    print(f"  phases that waited > 50 us: {len(met)} of {n}; woke with both CPUs busy: {sum(p['busy_at_wake'] for p in sel)}")
    print(f"  slices per phase: {Counter(p['slices'] for p in sel).most_common()}")
    allsl = [s for p in W for s in sleeps[p]]
    if allsl:
        print(f"  sleep, switch-out to waking, us: {q(allsl)}")
    if late:
        print(f"  sleep timers fired late by, ns: {q(late)}")
    print(f"preemptions of a worker mid-run: {dict(preempt)}")
    print(f"wake-ups: {dict(wake_cpu)}")
    print("a worker woken onto a CPU where another worker runs (after 0.5 s too):")
    for kind, xs in sorted(outcome.items()):
        xs = [x for x in xs if x[2] > t0 + skip * 1e6]
        if not xs:
            continue
        print(f"  {kind}: {len(xs)}; waited us {q([x[0] for x in xs])}; since the CPU's last tick us {q([x[1] for x in xs])}")
    print(f"migrations of workers: {dict(migr)}")
    print("waited runnable, after the first 0.5 s, by what the worker's CPU and the other did, ms:")
    for what, us in wait_by.most_common():
        print(f"  {what}: {us / 1e3:.1f}")


if __name__ == "__main__":
    main()
