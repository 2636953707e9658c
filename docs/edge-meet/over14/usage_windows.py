"""over14: the workers' CPU time (ms) in each 250 ms window of one edge-grid row, per seed, set up as
the regrade sets it up:  python usage_windows.py GRID.json WORKLOAD THREADS PERIOD_US QUOTA_US BURST_US SEEDS"""
import sys, collections, json
sys.path.insert(0, __import__("os").path.dirname(__file__))
from simrow import row_runs, seed_trace
grid, w, t, p, q, b = sys.argv[1:7]; seeds = int(sys.argv[7])
k = (w, int(t), int(p), int(q), int(b)); n = int(t)
_, text, runs = row_runs(grid, k, 30.0)
tot = collections.Counter()
for s in range(1, seeds + 1):
    recs, _, out = seed_trace(text, runs[(s - 1) % len(runs)]["host"], s)
    cur, last = {}, {}
    win = collections.Counter()
    for r in recs:
        if r["kind"] != "switch": continue
        c = r["cpu"]
        if cur.get(c) is not None and cur[c] < n:
            # split the stint over 250 ms windows
            a, e = last[c], r["t_ns"]
            while a < e:
                wi = a // 250_000_000; end = min(e, (wi + 1) * 250_000_000)
                win[wi] += end - a; a = end
        cur[c] = r.get("arg"); last[c] = r["t_ns"]
    tot.update(win)
    print(s, " ".join(f"{win[i]/1e6:6.1f}" for i in range(8)))
print("mean", " ".join(f"{tot[i]/1e6/seeds:6.1f}" for i in range(8)))
