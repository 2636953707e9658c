"""Rows alike in an edge grid's JSON, by row group, set up like the host and
alone: python grid_counts.py GRID.json [OTHER.json] (with two, the rows whose
verdict changed). A releases grid's JSON (no scenario-alone column) counts its
unpaired verdicts by workload and quota, in both columns."""
import json
import sys


def group(r):
    if "alike_alone" not in r:  # the releases grid
        return f"{'spinners' if r['workload'] == 'spin' else 'run/sleep'} at {r['quota_us'] / r['period_us']:g} CPUs"
    return "spinners" if r["workload"] == "spin" else f"run/sleep, {r['threads']} thread{'s' if r['threads'] > 1 else ''}"


def counts(rows):
    out = {}
    for r in rows:
        for g in ("all", group(r)):
            a = out.setdefault(g, [0, 0, 0])
            a[0] += r["alike"]
            a[1] += r.get("alike_alone", r["alike"])
            a[2] += 1
    return out


def key(r):
    return (r["workload"], r["threads"], r["period_us"], r["quota_us"], r["burst_us"])


grids = [json.load(open(p))["rows"] for p in sys.argv[1:]]
cs = [counts(g) for g in grids]
print("| rows | " + " | ".join(f"alike like the host / alone ({p})" for p in sys.argv[1:]) + " |")
for g in cs[0]:
    print(f"| {g} | " + " | ".join(f"{c[g][0]} / {c[g][1]} of {c[g][2]}" for c in cs) + " |")
if len(grids) == 2:
    after = {key(r): r for r in grids[1]}
    for r in grids[0]:
        b = after[key(r)]
        for col, ratio in (("alike", "sim_ratio"), ("alike_alone", "sim_ratio_alone")):
            if col in r and r[col] != b[col]:
                kr = r["kernel_ratio"]
                print(f"{col}: {group(r)} period {r['period_us']} quota {r['quota_us']} burst {r['burst_us']} demand/quota {r.get('demand_ratio', '-')}: "
                      f"{r.get('threads')} threads, {r[col]} -> {b[col]} (kernel {min(kr):.2f}-{max(kr):.2f}, simulator median {sorted(r[ratio])[len(r[ratio])//2]:.2f} -> {sorted(b[ratio])[len(b[ratio])//2]:.2f})")
