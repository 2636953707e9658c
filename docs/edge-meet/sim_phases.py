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
    # Per thread: its running slices (start, end).
    cur = {}
    slices = defaultdict(list)
    for r in recs:
        if r["kind"] != "switch":
            continue
        c, t = r["cpu"], r["t_ns"] / 1e3
        if c in cur and cur[c][0] is not None:
            slices[cur[c][0]].append((cur[c][1], t))
        # The scenario's group only (tg 1): the host's background threads are the root's.
        cur[c] = (r.get("arg") if r["tg"] == 1 else None, t)
    sleep_us = 18600.0
    # A run phase is over when its thread has had run_us of work: run_us /
    # work_speed of CPU (the simulator's runs are exact).
    need_us = 10000.0 / (json.loads(host)["work_speed"] if host else 1.0) - 1.0
    phases = []
    for tid, sl in slices.items():
        ph = None
        for a, b in sl:
            if ph is None:
                wake = phases[-1]["end"] + sleep_us if phases and phases[-1]["tid"] == tid else a
                ph = dict(tid=tid, wake=wake, start=a, end=b, cpu_us=0.0, slices=0)
            ph["cpu_us"] += b - a
            ph["slices"] += 1
            ph["end"] = b
            if ph["cpu_us"] >= need_us:
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


if __name__ == "__main__":
    main()
