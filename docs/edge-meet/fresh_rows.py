"""Measure a few edge-grid rows afresh on the host's kernel (5 runs each) and
store them as a grid JSON that ``fidelity_grid.py --regrade`` takes: a second
kernel sample for rows the wake-up fix was looked at against.

    tl-measure python docs/edge-meet/fresh_rows.py OUT.json
    python scripts/fidelity_grid.py --grid edge --regrade OUT.json --seeds 20 --out OUT.md
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from fidelity_grid import edge_configurations, kernel_runs, key, measured, save, scenario_text  # noqa: E402

# (threads, period ms, demand / quota, burst): the example (still apart
# after the fix) and three 4-thread rows the fix brought alike.
ROWS = [(4, 20, 1.05, True), (4, 100, 1.05, False), (4, 50, 1.05, False), (4, 20, 1.1, False)]


def main():
    out = Path(sys.argv[1])
    chosen = [c for c in edge_configurations() if c["workload"] != "spin" and
              (c["threads"], c["period_us"] // 1000, c["demand_ratio"], c["burst_us"] > 0) in ROWS]
    assert len(chosen) == len(ROWS), chosen
    doc = {"host": None, "rows": []}
    for c in chosen:
        kernel = kernel_runs(scenario_text(c, 2.0), runs=5)
        doc["host"] = doc["host"] or kernel[0]["host"]
        doc["rows"].append({**c, **measured(kernel)})
        save(out, doc)
        print(key(c), [round(r, 2) for r in doc["rows"][-1]["kernel_ratio"]], flush=True)


if __name__ == "__main__":
    main()
