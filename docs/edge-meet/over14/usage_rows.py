"""over14: the group's mean CPU-seconds over the 4-thread run/sleep rows at demand / quota 0.8
and 0.9 without burst (8 rows, hardly throttled: a check of placement alone), kernel against
each regrade of regrade_all.sh:  python usage_rows.py GRID TAG... (reads /tmp/over14-TAG-GRID.json)"""
import json
import statistics
import sys

grid, tags = sys.argv[1], sys.argv[2:]
rows = {}
for tag in tags:
    for r in json.load(open(f"/tmp/over14-{tag}-{grid}.json"))["rows"]:
        if r["workload"] != "spin" and r["threads"] == 4 and r["demand_ratio"] in (0.8, 0.9) and r["burst_us"] == 0:
            row = rows.setdefault((r["demand_ratio"], r["period_us"]), {"kernel": r["kernel_usage_s"]})
            row[tag] = r["sim_usage_s"]
print(f"| {grid} | " + " | ".join(f"{statistics.fmean(v[k] for v in rows.values()):.3f}" for k in ["kernel", *tags]) + " |")
