"""The like-host simulator column of a stored `compare --json`, before and
after the probe's median: the same kernel runs and probes; the simulator's
seeds set up as compare sets them (simulator_runs), with and without each
run's `background_p50_us`.
    python docs/edge-diff/bgp50/columns.py SCENARIO.toml compare.json [SEEDS]"""

import json
import statistics
import sys

from throttlelab.compare import mean_host, simulator_runs

text = open(sys.argv[1]).read()
doc = json.load(open(sys.argv[2]))
seeds = int(sys.argv[3]) if len(sys.argv) > 3 else len(doc["kernel_runs"])
kernel = doc["kernel_runs"]
without = [{**run, "host": {k: v for k, v in run["host"].items() if k != "background_p50_us"}} for run in kernel]


def column(runs):
    return [r["cgroups"]["app"]["nr_throttled"] for r in simulator_runs(text, runs, seeds=seeds)]


host = mean_host([r["host"] for r in kernel])
print(f"probes: {[round(r['host']['background_per_s'], 1) for r in kernel]} /s, mean"
      f" {[round(r['host']['background_us']) for r in kernel]} us, median {[r['host'].get('background_p50_us') for r in kernel]} us;"
      f" compare's host: {host['background_per_s']:.1f}/s x {host['background_us']:.0f} us, median {host.get('background_p50_us')}")
k = [r["cgroups"]["app"]["nr_throttled"] for r in kernel]
print(f"kernel nr_throttled {k} of {kernel[0]['cgroups']['app']['nr_periods']} periods, mean {statistics.mean(k):.1f}")
for label, runs in (("before (mean length)", without), ("after (with the median)", kernel)):
    v = column(runs)
    print(f"simulator {seeds} seeds, {label}: {v}, mean {statistics.mean(v):.1f}")
