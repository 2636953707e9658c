#!/usr/bin/env python3
"""advise --prometheus's rows on the first N containers of the synthetic fleet
(scripts/prometheus_fleet_bench.py's, 8 one-minute windows), local pool of 2
(or WORKERS: 1 runs every simulation in this process, whose CPU seconds are then
the timings' fit_cpu_s and search_cpu_s), as JSON: run once with this branch's package and once with main's (PYTHONPATH
to a copy whose prometheus_model.py is main's), then compare (prom5; prom6 keeps it, #35).
    python docs/prometheus-live/run-2-prom6/fleet_rows.py FLEET.json N OUT.json [WORKERS]
"""

import json
import sys
import time
from pathlib import Path

import throttlelab.prometheus_model as model
from throttlelab.prometheus import connect, steps
from throttlelab.prometheus_advise import advise_prometheus
from throttlelab.prometheus_fixture import Fixture, serve
from throttlelab.prometheus_fleet import START_S, fixture, members
from throttlelab.runner import Runner

STEP_S, WINDOWS = 60, 8
#: Simulations asked for by the fit and by the search: a cost that load does not move.
SIMULATIONS = {"fit": 0, "search": 0}


def _counted(runs, key: str):
    def counted(self, *args):
        out = runs(self, *args)
        SIMULATIONS[key] += len(out)
        return out
    return counted


model.Fit.runs = _counted(model.Fit.runs, "fit")  # type: ignore[method-assign]
model.Plan.runs = _counted(model.Plan.runs, "search")  # type: ignore[method-assign]


def main(fleet: Path, n: int, out: Path, workers: int = 2) -> None:
    if not fleet.exists():
        with Runner(workers=2) as runner:
            fleet.write_text(json.dumps(fixture(members(n, WINDOWS), STEP_S, runner)))
    server, url = serve(Fixture(json.loads(fleet.read_text())))
    at = steps(START_S + WINDOWS * STEP_S, WINDOWS * STEP_S, STEP_S)
    timings: dict[str, float] = {}
    t = time.monotonic()
    with Runner("local", None, workers) as runner:
        rows = advise_prometheus(connect(url, at[0], at[-1], STEP_S), "", at, 0.05, runner, timings=timings)
    server.shutdown()
    out.write_text(json.dumps({"wall_s": time.monotonic() - t, "timings": timings, "simulations": SIMULATIONS, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), *map(int, sys.argv[4:5]))
