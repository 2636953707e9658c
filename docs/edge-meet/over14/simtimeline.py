"""over14: the simulator's first events of one seed of an edge-grid row, set up as
the regrade sets it up: each CPU's switches to and from the workers (t0-t3, the
first threads), throttles, unthrottles and refills of the group, in ms.

  python simtimeline.py GRID.json WORKLOAD THREADS PERIOD_US QUOTA_US BURST_US SEED [TO_MS]"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simrow import row_runs, seed_trace  # noqa: E402

grid, workload, threads, period, quota, burst, seed = sys.argv[1:8]
to_ms = float(sys.argv[8]) if len(sys.argv) > 8 else 250
k = (workload, int(threads), int(period), int(quota), int(burst))
_, text, runs = row_runs(grid, k, 30.0)
recs, _, _ = seed_trace(text, runs[(int(seed) - 1) % len(runs)]["host"], int(seed))
n = int(threads)
cur = {}
for r in recs:
    t = r["t_ns"] / 1e6
    if t > to_ms:
        break
    if r["kind"] == "switch":
        nxt = r.get("arg")
        prev = cur.get(r["cpu"])
        cur[r["cpu"]] = nxt
        if (prev is not None and prev < n) or (nxt is not None and nxt < n):
            name = lambda x: "idle" if x is None else (f"t{x}" if x < n else f"bg{x}")  # noqa: E731
            print(f"{t:9.3f} CPU {r['cpu']} {name(prev)} -> {name(nxt)}")
    elif r["kind"] in ("throttle", "unthrottle", "refill") and r["tg"] == 1:
        print(f"{t:9.3f} CPU {r['cpu']} {r['kind']} global {r['global_ns'] / 1e6:.3f} local {None if r['local_ns'] is None else round(r['local_ns'] / 1e6, 3)}")
