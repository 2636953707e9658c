"""Measure a few edge-grid rows afresh on the host's kernel (5 runs each) and
store them as a grid JSON that ``fidelity_grid.py --regrade`` takes: a second
kernel sample for rows the wake-up fix was looked at against.

    tl-measure python docs/edge-meet/fresh_rows.py OUT.json [THREADS,PERIOD_MS,DEMAND/QUOTA,BURST ...] [--max-minutes M]
    tl-measure python docs/edge-meet/fresh_rows.py OUT.json spin,THREADS,PERIOD_MS,BURST ...   (spinner rows)
    python scripts/fidelity_grid.py --grid edge --regrade OUT.json --seeds 20 --out OUT.md
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from fidelity_grid import edge_configurations, kernel_runs, key, measured, save, scenario_text  # noqa: E402

# (threads, period ms, demand / quota, burst): the example (still apart
# after the fix) and three 4-thread rows the fix brought alike.
ROWS = [(4, 20, 1.05, True), (4, 100, 1.05, False), (4, 50, 1.05, False), (4, 20, 1.1, False)]


def main():
    args = sys.argv[1:]
    max_s = float(args.pop(args.index("--max-minutes") + 1)) * 60 if "--max-minutes" in args else None
    args = [a for a in args if a != "--max-minutes"]
    out = Path(args[0])
    # A row on the command line: threads, period in ms, demand / quota, burst (0 or 1); a
    # spinner's (demand / quota 1): spin, threads, period in ms, burst.
    rows = [("spin", int(t), int(p), 1.0, b == "1") if w == "spin" else ("run", int(w), int(t), float(p), b == "1")
            for w, t, p, b in (a.split(",") for a in args[1:])] or [("run", *r) for r in ROWS]
    chosen = [c for c in edge_configurations() if ("spin" if c["workload"] == "spin" else "run",
              c["threads"], c["period_us"] // 1000, c["demand_ratio"], c["burst_us"] > 0) in rows]
    assert len(chosen) == len(rows), chosen
    doc = {"host": None, "rows": []}
    start = time.monotonic()
    for c in chosen:
        if max_s is not None and time.monotonic() - start > max_s:
            print("time is up: no more rows", flush=True)
            break
        kernel = kernel_runs(scenario_text(c, 2.0), runs=5)
        doc["host"] = doc["host"] or kernel[0]["host"]
        doc["rows"].append({**c, **measured(kernel)})
        save(out, doc)
        print(key(c), [round(r, 2) for r in doc["rows"][-1]["kernel_ratio"]], flush=True)


if __name__ == "__main__":
    main()
