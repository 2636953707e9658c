"""Tables of a hold's comparisons (hold.py): per variant and limited cgroup,
the kernel's 5 runs against 20 simulator seeds set up like the host (the
runs' mean host, as compare does) and 20 seeds of the scenario alone, U test
at 5 %; for services, the requests' p99 as well.
    python docs/edge-cases/analyse.py HOLDDIR [SEEDS]"""
import json, statistics, sys
from pathlib import Path

sys.path.insert(0, "docs/edge-cases")
from variants import VARIANTS
from throttlelab.compare import simulator_runs, verdict
from throttlelab.runner import Run, Runner
from throttlelab.scenarios import load_scenario_text

hold, seeds = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 20


def ratios(docs, cg):
    return [d["cgroups"][cg]["nr_throttled"] / max(1, d["cgroups"][cg]["nr_periods"]) for d in docs]


def p99s(docs):
    return [max(t["latency_us"]["p99"] for t in d["tasks"].values() if "latency_us" in t) / 1e3 for d in docs]


def cell(v):
    return f"{min(v):.2f}-{max(v):.2f} (median {statistics.median(v):.2f})"


rows = []
for name, (scen, sets) in VARIANTS.items():
    f = hold / f"{name}.json"
    if not f.exists() or not f.read_text().strip():
        continue
    kernel = json.loads(f.read_text())["kernel_runs"]
    text, _ = load_scenario_text(scen)
    like = simulator_runs(text, kernel, sets, seeds=seeds)
    with Runner() as r:
        alone = r.run_many([Run(text, [*sets, f"seed={i}"]) for i in range(1, seeds + 1)])
    for cg, c in kernel[0]["cgroups"].items():
        if not c["nr_periods"]:
            continue
        k, l, a = ratios(kernel, cg), ratios(like, cg), ratios(alone, cg)
        rows.append((name, f"{cg} throttled ratio", cell(k), cell(l), verdict(k, l), cell(a), verdict(k, a)))
    if any("latency_us" in t for t in kernel[0]["tasks"].values()):
        k, l, a = p99s(kernel), p99s(like), p99s(alone)
        rows.append((name, "p99 ms", cell(k), cell(l), verdict(k, l), cell(a), verdict(k, a)))
    bg = statistics.fmean(d["host"]["background_per_s"] for d in kernel)
    print(f"{name}: background {bg:.0f}/s x {statistics.fmean(d['host']['background_us'] for d in kernel):.0f} us", file=sys.stderr)

print("| variant | metric | kernel, 5 runs | like host, 20 seeds | | alone, 20 seeds | |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
