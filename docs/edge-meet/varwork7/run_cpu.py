"""The worker's run phases' CPU time, phase by phase, from a trace.sh trace.

python run_cpu.py OUT.trace [...] [--from-s 0.5] [--json OUT.json]

A run phase lasts from a worker thread's wake-up to its switch-out asleep.
For each phase: the CPU the kernel charged it (its sched_stat_runtime
charges, what cpu.stat's usage and the quota count), the time spent inside
interrupt handlers while it ran (ticks, IPIs, device interrupts and the
softirqs run on their exit: this host has no IRQ_TIME_ACCOUNTING, so all of
it is charged to the worker), the ticks it took, whether it changed CPU
(within the phase, or from the previous phase's CPU) and how long another
worker ran on the other CPU meanwhile. The rest, charged minus interrupts,
is the calibrated loop's own time.
"""
import json
import re
import statistics as st
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*(.{16})-(\d+)\s+\[(\d+)\]\s+(\S+)\s+([\d.]+):\s+(\w+):\s+(.*)$")
KV = re.compile(r"(\w+)=(\S+)")
IRQ = {"local_timer", "reschedule", "call_function", "call_function_single", "irq_handler", "softirq"}


def events(path):
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if m:
            _, pid, cpu, _, ts, name, rest = m.groups()
            yield float(ts) * 1e6, int(cpu), int(pid), name, rest


def switch(rest):
    a, b = rest.split(" ==> ")
    fa, fb = dict(KV.findall(a)), dict(KV.findall(b))
    return int(fa["prev_pid"]), fa["prev_comm"], fa["prev_state"], int(fb["next_pid"]), fb["next_comm"]


def phases_of(path):
    evs = list(events(path))
    # The workers: the worker's threads (comm cut to 15 characters) charged over 0.1 s.
    charged = defaultdict(int)
    for ts, cpu, pid, name, rest in evs:
        if name == "sched_stat_runtime" and "comm=throttlelab-wor " in rest:
            f = dict(KV.findall(rest))
            charged[int(f["pid"])] += int(f["runtime"])
    workers = {p for p, ns in charged.items() if ns > 1e8}
    cur = {}  # worker -> the phase under way
    running = {}  # cpu -> pid
    irq_open = {}  # cpu -> (kind, ts, pid)
    last_cpu = {}
    done = []
    for ts, cpu, pid, name, rest in evs:
        if name == "sched_wakeup":
            f = dict(KV.findall(rest))
            p = int(f["pid"])
            if p in workers:
                tgt = int(f["target_cpu"])
                cur[p] = dict(wake=ts, charged_ns=0, irq_us=0.0, ticks=0, irqs=0, cpus={tgt}, slices=0,
                              moved_from_last=last_cpu.get(p, tgt) != tgt, since=None)
                if running.get(tgt, 0) == 0:
                    # Woken onto an idle CPU: it runs at once (this host's
                    # trace often lacks the idle task's switch to it).
                    running[tgt] = p
                    cur[p]["since"], cur[p]["slices"] = ts, 1
        elif name == "sched_stat_runtime":
            f = dict(KV.findall(rest))
            p = int(f["pid"])
            if p in cur:
                cur[p]["charged_ns"] += int(f["runtime"])
        elif name == "sched_migrate_task":
            f = dict(KV.findall(rest))
            p = int(f["pid"])
            if p in cur:
                cur[p]["cpus"].add(int(f["dest_cpu"]))
        elif name.endswith("_entry") and name[:-6] in IRQ:
            irq_open[cpu] = (ts, pid)
            if pid in cur and name == "local_timer_entry":
                cur[pid]["ticks"] += 1
        elif name.endswith("_exit") and name[:-5] in IRQ:
            if cpu in irq_open:
                t0, p = irq_open.pop(cpu)
                if p in cur and p == pid:
                    cur[p]["irq_us"] += ts - t0
                    cur[p]["irqs"] += 1
        elif name == "sched_switch":
            prev, _, pstate, nxt, _ = switch(rest)
            if prev in cur:
                ph = cur[prev]
                if ph["since"] is not None:
                    ph["oncpu_us"] = ph.get("oncpu_us", 0.0) + ts - ph["since"]
                    ph["since"] = None
                if not pstate.startswith("R"):
                    ph["end"] = ts
                    last_cpu[prev] = cpu
                    ph["cpus"] = sorted(ph["cpus"])
                    done.append((prev, ph))
                    del cur[prev]
            running[cpu] = nxt
            if nxt in cur and cur[nxt]["since"] is None:
                cur[nxt]["since"] = ts
                cur[nxt]["slices"] += 1
                cur[nxt]["cpus"].add(cpu)
    return workers, done


def overlap(done):
    """For each phase, the time another worker's phase ran at the same time (wake to end)."""
    spans = sorted((ph["wake"], ph["end"], p) for p, ph in done)
    for p, ph in done:
        ph["overlap_us"] = sum(max(0.0, min(ph["end"], e) - max(ph["wake"], w)) for w, e, q in spans if q != p and w < ph["end"] and e > ph["wake"])


def stats(xs):
    xs = sorted(xs)
    n = len(xs)
    m = st.fmean(xs)
    sd = st.pstdev(xs)
    pick = lambda q: xs[min(n - 1, int(q * n))]
    return dict(n=n, mean=round(m, 1), sd=round(sd, 1), cv=round(sd / m, 4) if m else None, min=round(xs[0], 1),
                p01=round(pick(0.01), 1), p10=round(pick(0.1), 1), p50=round(pick(0.5), 1), p90=round(pick(0.9), 1),
                p99=round(pick(0.99), 1), max=round(xs[-1], 1))


def fmt(name, s):
    return (f"  {name}: n {s['n']}, mean {s['mean']}, sd {s['sd']}, cv {s['cv']}; min {s['min']} p1 {s['p01']} p10 {s['p10']}"
            f" p50 {s['p50']} p90 {s['p90']} p99 {s['p99']} max {s['max']}")


def main():
    args = [a for a in sys.argv[1:]]
    skip = float(args[args.index("--from-s") + 1]) if "--from-s" in args else 0.5
    out = args[args.index("--json") + 1] if "--json" in args else None
    paths = [a for a in args if a.endswith(".trace")]
    report = {}
    for path in paths:
        workers, done = phases_of(path)
        t0 = min(ph["wake"] for _, ph in done)
        # Whole phases after the first `skip` s, and not the last one of each thread (cut by the end).
        last = {p: max(ph["wake"] for q, ph in done if q == p) for p in workers}
        sel = [(p, ph) for p, ph in done if ph["wake"] > t0 + skip * 1e6 and ph["wake"] < last[p]]
        overlap(done)
        rows = [dict(charged_us=ph["charged_ns"] / 1e3, irq_us=ph["irq_us"], loop_us=ph["charged_ns"] / 1e3 - ph["irq_us"],
                     oncpu_us=ph.get("oncpu_us", 0.0), ticks=ph["ticks"], irqs=ph["irqs"], slices=ph["slices"],
                     migrated=len(ph["cpus"]) > 1 or ph["moved_from_last"], overlap_us=ph["overlap_us"]) for p, ph in sel]
        print(f"{path}: {len(workers)} workers, {len(rows)} run phases after the first {skip} s")
        r = {}
        for key in ("charged_us", "loop_us", "irq_us", "oncpu_us"):
            r[key] = stats([x[key] for x in rows])
            print(fmt(key, r[key]))
        r["ticks"] = stats([x["ticks"] for x in rows])
        print(fmt("ticks", r["ticks"]))
        for label, cond in (("migrated", lambda x: x["migrated"]), ("stayed", lambda x: not x["migrated"]),
                            ("one slice", lambda x: x["slices"] == 1), ("preempted (2+ slices)", lambda x: x["slices"] > 1),
                            ("alone (no other worker's phase overlapped over 1 ms)", lambda x: x["overlap_us"] < 1000),
                            ("overlapped by another worker's phase over 1 ms", lambda x: x["overlap_us"] >= 1000)):
            sub = [x for x in rows if cond(x)]
            if sub:
                r[label] = dict(charged_us=stats([x["charged_us"] for x in sub]), loop_us=stats([x["loop_us"] for x in sub]))
                print(f" {label}:")
                print(fmt("charged_us", r[label]["charged_us"]))
                print(fmt("loop_us", r[label]["loop_us"]))
        r["phases"] = [{k: (round(v, 1) if isinstance(v, float) else v) for k, v in x.items()} for x in rows]
        report[path.rsplit("/", 1)[-1]] = r
    if out:
        json.dump(report, open(out, "w"), indent=0)


if __name__ == "__main__":
    main()
