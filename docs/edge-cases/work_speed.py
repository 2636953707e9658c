"""How the throttled ratio of a variant at demand / quota 1.0 moves with the
work speed alone (20 seeds of the scenario alone each): the median and range.
    python docs/edge-cases/work_speed.py VARIANT..."""
import statistics, sys

sys.path.insert(0, "docs/edge-cases")
from variants import VARIANTS
from throttlelab.runner import Run, Runner
from throttlelab.scenarios import load_scenario_text

SPEEDS = (1.0, 0.995, 0.99, 0.98, 0.97, 0.96)
print("| variant | work speed " + " | ".join(map(str, SPEEDS)) + " |")
print("|---" * (len(SPEEDS) + 1) + "|")
for name in sys.argv[1:]:
    scen, sets = VARIANTS[name]
    text, _ = load_scenario_text(scen)
    cells = []
    for ws in SPEEDS:
        with Runner() as r:
            docs = r.run_many([Run(text, [*sets, f"machine.work_speed={ws}", f"seed={i}"]) for i in range(1, 21)])
        cg = next(c for c in docs[0]["cgroups"] if c != "pod") if "nested" in name else "app"
        v = [d["cgroups"][cg]["nr_throttled"] / max(1, d["cgroups"][cg]["nr_periods"]) for d in docs]
        cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})")
    print(f"| {name} | " + " | ".join(cells) + " |")
