"""Hold 1 of #34's three edge cases: `throttlelab compare --runs 5 --json` of
every variant (variants.py), then `throttlelab diff --runs 2` of each case's
worst variant that diff can trace (one limited cgroup), by the distance of the
simulator's mean throttled ratio from the kernel's. Run from the worktree:
    tl-measure python docs/edge-cases/hold.py OUTDIR [BUDGET_S [COMPARED [DIFFED]]]
COMPARED and DIFFED (hold 2): comma-separated variants to compare, and to
diff instead of the worst."""
import json, subprocess, sys, time

sys.path.insert(0, "docs/edge-cases")
from variants import CASES, VARIANTS

out, budget = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 430
only = sys.argv[3].split(",") if len(sys.argv) > 3 else list(VARIANTS)
diffed = sys.argv[4].split(",") if len(sys.argv) > 4 else None
t0 = time.monotonic()
subprocess.run(["mkdir", "-p", out], check=True)


def ratio(doc_cg):
    return doc_cg["nr_throttled"] / max(1, doc_cg["nr_periods"])


gap = {}
for name in only:
    scen, sets = VARIANTS[name]
    if time.monotonic() - t0 > budget - 60:
        print(f"{name}: skipped, out of time", flush=True)
        continue
    t = time.monotonic()
    args = ["throttlelab", "compare", scen, "--runs", "5", "--json"] + [a for s in sets for a in ("--set", s)]
    p = subprocess.run(args, capture_output=True, text=True)
    open(f"{out}/{name}.json", "w").write(p.stdout)
    if p.returncode:
        print(f"{name}: exit {p.returncode}: {p.stderr.strip()[-300:]}", flush=True)
        continue
    r = json.loads(p.stdout)
    limited = [c for c in r["kernel_runs"][0]["cgroups"] if r["kernel_runs"][0]["cgroups"][c].get("nr_periods")]
    g = max(abs(sum(ratio(d["cgroups"][c]) for d in r["kernel_runs"]) / 5 - sum(ratio(d["cgroups"][c]) for d in r["sim_runs"]) / 5) for c in limited)
    diffable = sum(1 for s in sets if "quota_us=-1" in s) or "nested" not in name
    gap[name] = (g, diffable)
    print(f"{name}: {time.monotonic() - t:.0f} s, throttled ratio gap {g:.3f}", flush=True)

worst = [max([(g, n) for n, (g, ok) in gap.items() if ok and n.startswith(p)] or [(0, None)])[1] for p in CASES.values()]
for name in diffed or [n for n in worst if n]:
    if time.monotonic() - t0 > budget - 20:
        continue
    scen, sets = VARIANTS[name]
    args = ["throttlelab", "diff", scen, "--runs", "2", "-o", f"/tmp/edge5-{out.strip('/').split('/')[-1]}-diff-{name}"] + [a for s in sets for a in ("--set", s)]
    p = subprocess.run(args, capture_output=True, text=True)
    open(f"{out}/diff-{name}.txt", "w").write(p.stdout + p.stderr)
    print(f"diff {name}: exit {p.returncode}", flush=True)
print(f"hold: {time.monotonic() - t0:.0f} s", flush=True)
