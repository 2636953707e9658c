"""The paired simulator's throttled periods and usage for each kernel run of
hold.sh (seed N, then seeds 11-14), on whatever engine is built: the what-if of
docs/fidelity.md's "Four threads at 1.0, limited, event by event".

    python docs/edge-meet/rs4t8/throttled.py HOLD
"""
import json
import sys
from pathlib import Path
from throttlelab import diff
hold = Path(sys.argv[1])
for d in ("d50", "d100"):
    res = json.loads((hold / d / "diff.json").read_text())
    text_s = Path(f"docs/edge-meet/rs4t8/rs4-{d[1:]}-1.0.toml").read_text()
    resolved = json.loads(diff._native.validate(text_s, []))
    for run in res["runs"]:
        n = run["run"]
        host = dict(run["host"], tick_latency_us=run["tick_latency_us"])
        starts = diff.start_overrides(resolved, run["start_late_us"])
        outs = [diff.paired_sim(text_s, [f"seed={s}", *starts], host, 1)[0]["cgroups"]["app"] for s in (n, 11, 12, 13, 14)]
        print(f"{d[1:]} ms run {n}: kernel {run['kernel']['nr_throttled']} throttled, usage {run['kernel']['usage_usec']/1e6:.3f} s; simulator (seeds {n}, 11-14) "
              f"{', '.join(str(o['nr_throttled']) for o in outs)} throttled, usage {', '.join('%.3f' % (o['usage_usec'] / 1e6) for o in outs)}", flush=True)
