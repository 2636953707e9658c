"""The simulator's side of analyse_trace.py: its run phases from its own
switch records (``_native.trace``), with the same summary.

python sim_phases.py SCENARIO.toml SEED [HOST.json] [--set KEY=VALUE ...]
HOST.json: a real run's output, whose ``host`` sets the simulator up like
that host (as ``compare`` does). Sleeps are exact in the simulator, so a
phase's wake-up is its thread's previous phase's end plus ``sleep_us``.
"""
import json
import statistics as st
import sys
from collections import Counter, defaultdict

from throttlelab import _native


def main():
    path, seed = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    host = None
    if rest and not rest[0].startswith("--"):
        host = json.dumps(json.load(open(rest.pop(0)))["host"])
    sets = [rest[i + 1] for i in range(len(rest)) if rest[i] == "--set"]
    text = open(path).read()
    resolved = json.loads(_native.validate(text, sets))
    task = resolved["tasks"][0] if "tasks" in resolved else None
    run = _native.trace(text, [*sets, f"seed={seed}"], like_host=host)
    recs = []
    for _now, chunk in run:
        recs += json.loads(chunk)["records"]
    out = json.loads(run.output())
    # Per thread: its running slices (start, end, CPU); per CPU: its idle spans.
    cur = {}
    slices = defaultdict(list)
    idle = defaultdict(list)
    for r in recs:
        if r["kind"] != "switch":
            continue
        c, t = r["cpu"], r["t_ns"] / 1e3
        if c in cur and cur[c][0] is not None and t > cur[c][1]:
            # (A thread switched to and away at one instant ran no slice.)
            slices[cur[c][0]].append((cur[c][1], t, c))
        if c in cur and cur[c][2]:
            idle[c].append((cur[c][1], t))
        # The scenario's group only (tg 1): the host's background threads are the root's.
        cur[c] = (r.get("arg") if r["tg"] == 1 else None, t, r.get("arg") is None)
    sleep_us = 18600.0
    # A run phase is over when its thread has had run_us of work: run_us /
    # work_speed of CPU, where the simulator's runs are exact. Where they
    # spread (machine.work_speed_cv), over when it has had most of that and
    # its next slice starts a whole sleep later (a sleep is exact).
    need_us = 10000.0 / (json.loads(host)["work_speed"] if host else 1.0) - 1.0
    spread = bool(json.loads(host).get("work_speed_cv")) if host else any("work_speed_cv" in x for x in sys.argv)
    phases = []
    for tid, sl in slices.items():
        ph = None
        for i, (a, b, c) in enumerate(sl):
            if ph is None:
                done = phases[-1] if phases and phases[-1]["tid"] == tid else None
                wake = done["end"] + sleep_us if done else a
                ph = dict(tid=tid, wake=wake, start=a, end=b, cpu_us=0.0, slices=0, spans=[],
                          prev_cpu=done["cpu"] if done else c)
            ph["spans"].append((a, b, c))
            ph["cpu"] = c
            ph["cpu_us"] += b - a
            ph["slices"] += 1
            ph["end"] = b
            slept = i + 1 == len(sl) or sl[i + 1][0] - b >= sleep_us - 1.0
            if ph["cpu_us"] >= need_us if not spread else (ph["cpu_us"] >= 0.8 * need_us and slept):
                phases.append(ph)
                ph = None
    sel = [p for p in phases if p["wake"] > 0.5e6 and p["end"] < 2.99e6]
    for p in sel:
        p["wall_us"] = p["end"] - p["wake"]
        p["wait_us"] = max(0.0, p["wall_us"] - p["cpu_us"])

    def q(xs):
        xs = sorted(xs)
        return f"min {xs[0]:.0f} p10 {xs[len(xs)//10]:.0f} median {st.median(xs):.0f} p90 {xs[9*len(xs)//10]:.0f} max {xs[-1]:.0f}"
    c = out["cgroups"]["app"]
    print(f"simulator seed {seed}{' like the host' if host else ''}: usage_usec {c['usage_usec']}, "
          f"nr_throttled {c['nr_throttled']} of {c['nr_periods']}, throttled_usec {c['throttled_usec']}")
    print(f"run phases after the first 0.5 s: {len(sel)}")
    print(f"  CPU time per run phase, us: {q([p['cpu_us'] for p in sel])}")
    print(f"  wall time per run phase, us: {q([p['wall_us'] for p in sel])}")
    print(f"  waited runnable, us: {q([p['wait_us'] for p in sel])}; total {sum(p['wait_us'] for p in sel)/1e3:.1f} ms")
    print(f"  phases that waited > 50 us: {sum(p['wait_us'] > 50 for p in sel)} of {len(sel)}")
    print(f"  slices per phase: {Counter(p['slices'] for p in sel).most_common()}")
    placement(sel, slices, idle)


def placement(sel, slices, idle):
    """placement.py's wake-ups and stranded time, from the switch records:
    a phase's previous CPU is its thread's last one, the CPU chosen the one it
    runs on at once (else it waits on its previous CPU's queue)."""
    def state(c, t, tid):
        for a, b in idle[c]:
            if a <= t < b:
                return "idle"
        for o, sl in slices.items():
            if o != tid and any(a <= t < b and cc == c for a, b, cc in sl):
                return "a worker"
        return "another task"

    wakes = Counter()
    for p in sel:
        prev, w = p["prev_cpu"], p["wake"]
        a, _, c = p["spans"][0]
        moved = a - w < 1 and c != prev
        where = "moved to the other CPU" if moved else "on its previous CPU"
        wakes[f"{where}: previous CPU {state(prev, w - 0.001, p['tid'])}, other CPU {state(1 - prev, w - 0.001, p['tid'])}"] += 1
    print("wake-ups:")
    for k, n in sorted(wakes.items()):
        print(f"  {k}: {n}")
    # Waiting spans: before the first slice, and between slices.
    stranded = Counter()
    for p in sel:
        gaps = [(p["wake"], p["spans"][0][0], "placed on a busy CPU at its wake-up")]
        gaps += [(p["spans"][i][1], p["spans"][i + 1][0], "preempted") for i in range(len(p["spans"]) - 1)]
        for g0, g1, began in gaps:
            for c in (0, 1):
                for a, b in idle[c]:
                    stranded[began] += max(0.0, min(b, g1) - max(a, g0))
    # Pulls: a phase's next slice on another CPU. By an idle CPU's balance
    # when that CPU was idle until the slice (a newly idle pull follows its
    # CPU's previous thread at the same instant).
    idle_pulls, newidle_pulls = [], 0
    for p in sel:
        for (a, b, c), (a2, _, c2) in zip(p["spans"], p["spans"][1:]):
            if c2 == c:
                continue
            if any(i0 < a2 - 1 and a2 - 1 <= i1 <= a2 + 1 for i0, i1 in idle[c2]):
                idle_pulls.append((a2 - b) / 1e3)
            else:
                newidle_pulls += 1
    ms = sorted(idle_pulls)
    print(f"pulls within a run phase: newly idle {newidle_pulls}, by an idle CPU's balance {len(ms)}"
          + (f", which last ran ms before: min {ms[0]:.2f} median {ms[len(ms) // 2]:.2f} max {ms[-1]:.2f}; "
             f"under 0.5 ms (task_hot): {sum(m < 0.5 for m in ms)}" if ms else ""))
    print("stranded (runnable while a CPU is idle), by how it began, ms: "
          + ", ".join(f"{k} {v / 1e3:.1f}" for k, v in stranded.items()) + f"; total {sum(stranded.values()) / 1e3:.1f}")


if __name__ == "__main__":
    main()
