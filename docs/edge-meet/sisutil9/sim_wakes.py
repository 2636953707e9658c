"""The simulator's side of hint_trace.py's table: for each kernel run of a
guest_trace.py hold (OUT/run-N.json), the simulator paired to it (its host,
seed N, profile of SCENARIO), and its wake-ups by what the previous and the
other CPU ran, left or moved (rs4t8's periods.py, `placements`):

  python sim_wakes.py SCENARIO OUT [RUNS]
"""
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

from throttlelab import diff

here = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("periods", here.parent / "rs4t8" / "periods.py")
periods = importlib.util.module_from_spec(spec)
spec.loader.exec_module(periods)


def main() -> None:
    scenario, out = Path(sys.argv[1]), Path(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    text = scenario.read_text()
    resolved = json.loads(diff._native.validate(text, []))
    period_ns = resolved["cgroups"][0]["period_us"] * 1000
    dur_ns = round(resolved["duration_s"] * 1e9)
    total = Counter()
    for n in range(1, runs + 1):
        path = out / f"run-{n}.json"
        if not path.exists():
            continue
        kout = json.loads(path.read_text())
        host = dict(kout["host"])
        host.pop("vm", None)
        sout, records = diff.paired_sim(text, [f"seed={n}"], host, 1)
        sp, _log, _tl = periods.sim_side(records, 1, dur_ns)
        placed = periods.placements(sp, resolved["machine"]["cpus"], period_ns)
        k, s = kout["cgroups"]["app"], sout["cgroups"]["app"]
        print(f"run {n}: throttled kernel {k['nr_throttled']}/{k['nr_periods']}, simulator {s['nr_throttled']}/{s['nr_periods']}; "
              f"usage {k['usage_usec'] / 1e6:.3f} / {s['usage_usec'] / 1e6:.3f} s; work speed {host.get('work_speed')}")
        print("  simulator wake-ups after the first period: " + ", ".join(f"{k} {v}" for k, v in sorted(placed.items())))
        total.update(placed)
    print("all runs: " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))


if __name__ == "__main__":
    main()
