#!/usr/bin/env python3
"""The rows fleet_rows.py's two runs advise differently, each checked against the
container's hidden model (prom5; prom6 keeps it, #35): that model, at each window's usage, under
main's and this branch's recommended limit (seeds 7 and 8, which the fleet's
counters never used: they are 1000 + the window), mean throttled ratio.
    python docs/prometheus-live/run-2-prom6/fleet_truth.py FLEET.json ROWS-MAIN.json ROWS-PROM6.json N
"""

import json
import sys
from pathlib import Path

from throttlelab.prometheus_fleet import PERIOD_US, members
from throttlelab.prometheus_model import window_run
from throttlelab.runner import Runner


def main(fleet: Path, old: Path, new: Path, n: int) -> None:
    truth = {m.labels["id"]: m for m in members(n, 8)}
    a, b = json.loads(old.read_text())["rows"], json.loads(new.read_text())["rows"]
    changed = [(x, y) for x, y in zip(a, b) if (x["status"], x["recommended_m"]) != (y["status"], y["recommended_m"])]
    runs = []
    for x, y in changed:
        m = truth[x["id"]]
        for limit in (x["recommended_m"], y["recommended_m"]):
            if limit is not None:  # a refused row has no limit to check
                runs += [window_run(m.model, u, limit * PERIOD_US // 1000, PERIOD_US, m.node_cpus, seed=s) for u in m.usage_cpus for s in (7, 8)]
    with Runner(workers=2) as runner:
        docs = runner.run_many(runs)
    k, per = 0, 2 * 8
    met = {"main": 0, "prom6": 0}
    for x, y in changed:
        m = truth[x["id"]]
        shown = []
        for side, row in (("main", x), ("prom6", y)):
            if row["recommended_m"] is None:
                shown.append(f"{row['status']:>6} ({row['models']:>5})        ")
                continue
            ratio = sum(d["cgroups"]["container"]["throttled_ratio"] for d in docs[k : k + per]) / per
            k += per
            met[side] += ratio <= 0.05
            shown.append(f"{row['recommended_m']:>5}m ({row['models']:>5}) {100 * ratio:5.1f} %")
        print(f"{m.shape.name:8} {m.model.burst_us // 1000:>3} ms x{m.model.threads:<2} {m.node_cpus:>2} CPUs, limit {x['limit_m']:>4}m:"
              f" main {shown[0]}  ->  prom6 {shown[1]}")
    print(f"{len(changed)} of {len(a)} rows changed; at most 5 % on the hidden model: main {met['main']}, prom6 {met['prom6']}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
