"""Which part of the host's setup moves a variant (hold.py's runs): 20 seeds
of the scenario alone, with only the runs' mean work speed, with only their
mean background, and with both (the throttled ratio's median and range).
    python docs/edge-cases/decompose.py HOLDDIR VARIANT..."""
import json, statistics, sys
from pathlib import Path

sys.path.insert(0, "docs/edge-cases")
from variants import VARIANTS
from throttlelab.runner import Run, Runner
from throttlelab.scenarios import load_scenario_text

hold = Path(sys.argv[1])
for name in sys.argv[2:]:
    scen, sets = VARIANTS[name]
    kernel = json.loads((hold / f"{name}.json").read_text())["kernel_runs"]
    hosts = [d["host"] for d in kernel]
    ws = statistics.fmean(h["work_speed"] for h in hosts)
    per_s = statistics.fmean(h["background_per_s"] for h in hosts)
    us = sum(h["background_per_s"] * h["background_us"] for h in hosts) / sum(h["background_per_s"] for h in hosts)
    setups = {
        "alone": [],
        f"work_speed {ws:.3f}": [f"machine.work_speed={ws}"],
        f"background {per_s:.0f}/s x {us:.0f} us": [f"machine.background_per_s={per_s}", f"machine.background_us={us}"],
        "both": [f"machine.work_speed={ws}", f"machine.background_per_s={per_s}", f"machine.background_us={us}"],
    }
    text, _ = load_scenario_text(scen)
    for cg, c in kernel[0]["cgroups"].items():
        if not c["nr_periods"]:
            continue
        k = [d["cgroups"][cg]["nr_throttled"] / d["cgroups"][cg]["nr_periods"] for d in kernel]
        print(f"{name} {cg}: kernel {statistics.median(k):.2f} ({min(k):.2f}-{max(k):.2f})")
        for label, extra in setups.items():
            with Runner() as r:
                docs = r.run_many([Run(text, [*sets, *extra, f"seed={i}"]) for i in range(1, 21)])
            v = [d["cgroups"][cg]["nr_throttled"] / max(1, d["cgroups"][cg]["nr_periods"]) for d in docs]
            u = statistics.fmean(d["cgroups"][cg]["usage_usec"] for d in docs) / 1e6
            print(f"  {label}: {statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f}), usage {u:.3f} s")
