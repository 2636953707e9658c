"""`throttlelab diff`'s analysis again on a diff's saved traces (-o DIR:
diff.json and run-N.bw.txt, or .bw.txt.gz as kept under hold1/diff-traces), with the simulator paired anew: for traces
whose analysis an earlier parser got wrong (hold 1: comms from the cache).
    python docs/edge-cases/rediff.py VARIANT DIR [--rows]
--rows: one Markdown row per run (throttled periods, per kind the periods alike, the first divergence)."""
import gzip, json, sys
from pathlib import Path

sys.path.insert(0, "docs/edge-cases")
from variants import VARIANTS
from rich.console import Console
from throttlelab import diff
from throttlelab.scenarios import load_scenario_text

name, out = sys.argv[1], Path(sys.argv[2])
scen, sets = VARIANTS[name]
text, _ = load_scenario_text(scen)
saved = json.loads((out / "diff.json").read_text())
runs = saved["runs"]
duration_s = json.loads(diff._native.validate(text, list(sets)))["duration_s"]


def traced(_text, _runs, _settle_s):
    return [(json.dumps({"host": r["host"], "duration_s": duration_s, "cgroups": {saved["cgroup"]: r["kernel"]}}),
             read(out / f"run-{r['run']}.bw.txt")) for r in runs]


def read(path):
    return path.read_text() if path.exists() else gzip.decompress(path.with_suffix(".txt.gz").read_bytes()).decode()


result = diff.diff(text, sets, runs=len(runs), on=traced)
if "--rows" not in sys.argv:
    Console(width=120).print(*diff.render(result))
for r in result["runs"] if "--rows" in sys.argv else []:
    k, s = r["kernel"], r["sim"]
    alike = ", ".join(f"{kind} {a}/{n}" for kind, (a, n) in r["alike"].items())
    first = r["first_divergence"]
    print(f"| {name} | {r['run']} | {k['nr_throttled']}/{k['nr_periods']} | {s['nr_throttled']}/{s['nr_periods']} | {alike} | "
          + ("none" if first is None else f"period {first['period']}: {first['why']}") + " |")
