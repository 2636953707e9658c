"""rel61: a `throttlelab diff -o DIR`'s kernel runs paired again with the simulator
installed now (diff.pair_run on the stored trace and host), so that runs traced on
one engine are read against another: per run, cpu.stat's throttled periods and usage on
both sides and the first divergence.

  python repair.py SCENARIO DIR [KEY=VALUE ...]   # the --set overrides the diff ran with
"""
import json
import sys
from pathlib import Path

from throttlelab import _native, diff


def main() -> None:
    scenario, d, overrides = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    text = scenario.read_text()
    resolved = json.loads(_native.validate(text, overrides))
    _, name = diff.limited_group(resolved)
    for run in json.loads((d / "diff.json").read_text())["runs"]:
        n = run["run"]
        kout = {"host": run["host"], "duration_s": resolved["duration_s"], "cgroups": {name: run["kernel"]}}
        trace = (d / f"run-{n}.bw.txt").read_text(errors="replace")
        r = diff.pair_run(text, resolved, kout, trace, [*overrides, f"seed={n}"])
        k, s = r["kernel"], r["sim"]
        print(f"run {n}: throttled kernel {k['nr_throttled']}/{k['nr_periods']}, simulator {s['nr_throttled']}/{s['nr_periods']}"
              f"; usage {k['usage_usec'] / 1e6:.3f} / {s['usage_usec'] / 1e6:.3f} s;"
              f" first divergence: period {r['first_divergence'].get('period')}, {r['first_divergence'].get('why')}")


if __name__ == "__main__":
    main()
