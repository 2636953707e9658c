"""ruc11: kernel against simulator, summed over a sisutil9 hold's runs, by
wake-up class and recent_used_cpu's origin (recent_origin.py), and how the
wake-ups ended (kernel_wakes.py's classes):

  python compare.py HOLD_DIR SIM_PREFIX [RUNS]

HOLD_DIR holds trace-N.txt.gz and run-N.json; SIM_PREFIX-N.txt the
simulator's listing of the paired run N (sim_listing.py).
"""
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

here = Path(__file__).resolve().parent


def load(name):
    spec = importlib.util.spec_from_file_location(name, here / f"{name}.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


ro = load("recent_origin")
kw = ro.kw


def ends(ws):
    c = Counter()
    for w in ws:
        if w["t"] < 100 or w["path"] != "select":
            continue
        key = kw.classify(w)
        moved = w["target"] != w["prev"]
        how = ("moved by recent_used_cpu" if w["target"] == w["recent"] else "moved by the scan") if moved else "left"
        if w.get("waker", w["prev"]) != w["prev"]:
            how = "woken from the other CPU: " + ("moved" if moved else "left")
        c[(key, how)] += 1
    return c


def main() -> None:
    hold, prefix = Path(sys.argv[1]), sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    k_or, s_or, k_end, s_end = Counter(), Counter(), Counter(), Counter()
    for n in range(1, runs + 1):
        run = json.loads((hold / f"run-{n}.json").read_text())
        kws = [w for w in kw.wakes(hold / f"trace-{n}.txt.gz", run["host"]["uptime_s"], run["duration_s"])]
        sws = [w for w in ro.sim_wakes(Path(f"{prefix}-{n}.txt")) if w["t"] <= run["duration_s"] * 1e3]
        k_or.update(ro.origins(kws))
        s_or.update(ro.origins(sws))
        k_end.update(ends(kws))
        s_end.update(ends(sws))
    for title, k, s in (("where they went", k_end, s_end), ("recent_used_cpu at the wake-up", k_or, s_or)):
        print(f"{title:70} kernel  simulator")
        for key in sorted(set(k) | set(s)):
            print(f"  {' / '.join(key):68} {k[key]:6d} {s[key]:9d}")


if __name__ == "__main__":
    main()
