"""ddq12: the same counts as kernel_counts.py, from the simulator paired to
each run of a guest_trace.py hold (its host: background, work speed, wake-up
cost, timer phase), or unpaired (--seeds N, the scenario set up like run 1's
host with a seed each). The engine prints its moves only with
sim_listing.patch applied (not kept) and DDQ12_DEBUG set:

  git apply docs/edge-meet/ddq12/sim_listing.patch && pip install -e . (rebuild)
  DDQ12_DEBUG=1 python sim_counts.py SCENARIO HOLD_DIR [RUNS]
"""
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

CHILD = r'''
import json, sys
from throttlelab import diff
text, host, n = open(sys.argv[1]).read(), json.loads(sys.argv[2]), int(sys.argv[3])
out, _ = diff.paired_sim(text, [f"seed={n}"], host, 1)
cg = out["cgroups"]["app"]
print(json.dumps({"nr_throttled": cg["nr_throttled"], "nr_periods": cg["nr_periods"], "throttled_usec": cg["throttled_usec"]}))
'''


def sleeps_by_nr(lines):
    """The workers' sleeps by the entities on their runqueue, as kernel_counts.sleeps_by_nr."""
    by, last = {}, None
    for l in lines:
        f = l.split()
        if f[2] == "sleep" and f[3] == "tid" and int(f[4]) < 4:
            last = by.setdefault(int(f[f.index("nr") + 1]), [0, 0])
            last[0] += 1
        elif f[2] == "delay" and last is not None and f[3] == "tid":
            last[1] += 1
            last = None
        else:
            last = None
    return by


def sleeps_ran(lines):
    """Per worker sleep at nr_running 2: (ran since picked, ns; delayed; lag if not delayed)."""
    out, last = [], None
    for l in lines:
        f = l.split()
        if last is not None:
            delayed = f[2] == "delay" and f[3:5] == last[0]
            out.append((last[1], delayed, None if delayed else last[2]))
            last = None
        if f[2] == "sleep" and f[3] == "tid" and int(f[4]) < 4 and f[f.index("nr") + 1] == "2":
            last = (f[3:5], int(f[f.index("ran") + 1]), int(f[f.index("lag") + 1]))
    return out


def count(lines):
    c = Counter()
    for l in lines:
        f = l.split()
        what, who = f[2], f[3]
        task = who == "tid"
        tid = int(f[4]) if task else None
        worker = task and tid < 4
        if what == "delay":
            c["sleeps delayed" if worker else ("group entity delayed" if not task else "other delayed")] += 1
        elif what == "finish" and worker:
            c["finished (pick or unthrottle)"] += 1
        elif what == "finish_throttle" and worker:
            c["finished by a throttle"] += 1
        elif what in ("finish", "finish_throttle") and not task:
            c["group entity finished"] += 1
        elif what == "requeue" and worker:
            c["requeued in place"] += 1
            if l.endswith("placed"):
                c["requeued, placed anew (lag > 0)"] += 1
        elif what == "wake" and worker:
            c["wakes through select_task_rq"] += 1
            a, b = f[-1].split("->")
            if a != b:
                c["wakes moved by select_task_rq"] += 1
        elif what == "pull" and worker:
            c["pulls (newly idle)"] += 1
            if l.endswith("delayed=true"):
                c["delayed moved (balance)"] += 1
        elif what == "throttle":
            c["throttles"] += 1
            if not l.endswith("nd 0"):
                c["throttles with a delayed task inside"] += 1
    return c


def main() -> None:
    scenario, hold = sys.argv[1], Path(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    rows = []
    for n in range(1, runs + 1):
        host = dict(json.loads((hold / f"run-{n}.json").read_text())["host"])
        host.pop("vm", None)
        r = subprocess.run([sys.executable, "-c", CHILD, scenario, json.dumps(host), str(n)],
                           capture_output=True, text=True, check=True, env=dict(os.environ, DDQ12_DEBUG="1"))
        lines = [l for l in r.stderr.splitlines() if l.startswith("DDQ12 ")]
        c = count(lines)
        c["sleeps"] = c["wakes through select_task_rq"] + c["requeued in place"]
        out = json.loads(r.stdout)
        c["nr_throttled (cpu.stat)"] = out["nr_throttled"]
        rows.append(c)
        print(f"run {n}: sleeps (and delayed) by nr_running:", sorted(sleeps_by_nr(lines).items()))
        if os.environ.get("DDQ12_RAN"):
            Path(os.environ["DDQ12_RAN"] + f"-{n}.json").write_text(json.dumps(sleeps_ran(lines)))
    keys = sorted({k for c in rows for k in c})
    for k in keys:
        print(f"{k:40s} " + " ".join(f"{c.get(k, 0):6d}" for c in rows))


if __name__ == "__main__":
    main()
