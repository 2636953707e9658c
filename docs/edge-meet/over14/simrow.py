"""over14: one edge-grid row in the simulator, set up as the regrade sets it up
(the row's stored runs, seed i like stored run i mod n), per seed: the share of
periods throttled, each worker's CPU time per CPU (s), its migrations, and the
CPU each worker first ran on.

  python simrow.py GRID.json WORKLOAD THREADS PERIOD_US QUOTA_US BURST_US [SEEDS] [WAKEUP_COST_US]

(the regrade's --wakeup-cost-us: 30 for 6.12's grids). Which engine runs is the
venv's (main's or the start_cpu patch's build)."""
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from fidelity_grid import key, scenario_text, stored_runs  # noqa: E402
from throttlelab import _native  # noqa: E402


def row_runs(grid_path, k, wakeup_cost_us):
    stored = json.loads(Path(grid_path).read_text())
    row = next(r for r in stored["rows"] if key(r) == k)
    config = {c: row[c] for c in ("workload", "threads", "period_us", "quota_us", "burst_us")}
    return row, scenario_text(config, 2.0), stored_runs(stored["host"], row, wakeup_cost_us=wakeup_cost_us)


def seed_trace(text, host, seed):
    """The records of seed `seed` set up like `host`, and its output document."""
    run = _native.trace(text, [f"seed={seed}"], like_host=json.dumps(host))
    recs, threads = [], None
    for _, chunk in run:
        d = json.loads(chunk)
        threads = d.get("threads", threads)
        recs += d["records"]
    return recs, threads, json.loads(run.output())


def placement(recs, workers):
    """Per worker: CPU time per CPU (ns), migrations, first CPU; from the switch records."""
    cur, last = {}, {}
    ns, cpus = collections.Counter(), {}
    moves = collections.Counter()
    for r in recs:
        if r["kind"] != "switch":
            continue
        cpu = r["cpu"]
        if cur.get(cpu) is not None:
            ns[(cur[cpu], cpu)] += r["t_ns"] - last[cpu]
        tid = r.get("arg")
        cur[cpu], last[cpu] = tid, r["t_ns"]
        if tid in workers:
            if tid in cpus and cpus[tid] != cpu:
                moves[tid] += 1
            cpus.setdefault(tid, cpu)
            cpus[tid] = cpu
    return ns, moves


if __name__ == "__main__":
    grid, workload, threads, period, quota, burst = sys.argv[1:7]
    seeds = int(sys.argv[7]) if len(sys.argv) > 7 else 20
    cost = float(sys.argv[8]) if len(sys.argv) > 8 else 30.0
    k = (workload, int(threads), int(period), int(quota), int(burst))
    row, text, runs = row_runs(grid, k, cost)
    print(f"# {k}: kernel ratio {row['kernel_ratio']}")
    workers = set(range(int(threads)))
    ratios = []
    for i in range(seeds):
        recs, _, out = seed_trace(text, runs[i % len(runs)]["host"], i + 1)
        app = out["cgroups"]["app"]
        ratios.append(app["throttled_ratio"])
        ns, moves = placement(recs, workers)
        first = {}
        for r in recs:
            if r["kind"] == "switch" and r.get("arg") in workers:
                first.setdefault(r["arg"], r["cpu"])
        per = " ".join(f"t{t}:" + "/".join(f"{ns[(t, c)] / 1e9:.2f}" for c in (0, 1)) for t in sorted(workers))
        # The periods (refills before it) in which a throttle came.
        refills, thr = 0, set()
        for r in recs:
            if r["kind"] == "refill" and r["tg"] == 1:
                refills += 1
            elif r["kind"] == "throttle" and r["tg"] == 1:
                thr.add(refills)
        print(f"seed {i + 1}: ratio {app['throttled_ratio']:.3f} nr_throttled {app['nr_throttled']} "
              f"usage {app['usage_usec'] / 1e6:.3f} s; CPU 0/1 s: {per}; first CPU {[first.get(t) for t in sorted(workers)]}; "
              f"migrations {sum(moves.values())}; "
              f"periods throttled {''.join('x' if p in thr else '.' for p in range(refills + 1))}")
    ratios.sort()
    print(f"# median {ratios[len(ratios) // 2]:.3f}, {ratios}")
