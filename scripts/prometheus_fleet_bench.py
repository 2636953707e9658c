"""advise --prometheus on a synthetic fleet: containers/s for the fit and the
search, on the local pool and on Ray with 1 and 2 workers, and whether the
rows are identical everywhere.

    python scripts/prometheus_fleet_bench.py [--containers 1000] [--windows 12]
        [--executors local:2,ray:1,ray:2] [--address HOST:PORT] [-o OUT.json]

The fleet (throttlelab.prometheus_fleet) is generated once, through the local
pool, and served by throttlelab.prometheus_fixture; each executor then reads
it through prometheus-api-client as from a Prometheus. Wall-clock: note the
load average printed beside the numbers (a shared host is slower); with
``local:1`` every simulation runs in this process, and fit_cpu_s and
search_cpu_s are their CPU time, which a loaded host disturbs less. Ray runs
its workers at nice 15 unless RAY_worker_niceness says otherwise: this sets
it to 0 (where not set), so that Ray's workers and the local pool's compete
alike with whatever else the host runs."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from throttlelab.prometheus import connect, steps
from throttlelab.prometheus_advise import advise_prometheus
from throttlelab.prometheus_fixture import Fixture, serve
from throttlelab.prometheus_fleet import START_S, fixture, members
from throttlelab.runner import Runner

STEP_S = 60


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--containers", type=int, default=1000)
    ap.add_argument("--windows", type=int, default=12)
    ap.add_argument("--executors", default="local:2,ray:1,ray:2")
    ap.add_argument("--address", help="a Ray cluster for the ray executors (else a local instance of N CPUs)")
    ap.add_argument("--fleet", default="/tmp/throttlelab-fleet.json", help="the fixture file (made if absent)")
    ap.add_argument("-o", "--out")
    args = ap.parse_args()
    os.environ.setdefault("RAY_worker_niceness", "0")  # read by the Ray instance each executor starts

    path = Path(args.fleet)
    if not path.exists():
        t = time.monotonic()
        with Runner(workers=2) as runner:
            path.write_text(json.dumps(fixture(members(args.containers, args.windows), STEP_S, runner)))
        print(f"fleet of {args.containers}: generated in {time.monotonic() - t:.1f} s -> {path}")
    doc = json.loads(path.read_text())
    server, url = serve(Fixture(doc))
    at = steps(START_S + args.windows * STEP_S, args.windows * STEP_S, STEP_S)
    results, first_rows = [], None
    for spec in args.executors.split(","):
        executor, _, n = spec.partition(":")
        workers = int(n) if n else None
        if executor == "ray":
            import ray

            if ray.is_initialized():
                ray.shutdown()
        load = os.getloadavg()[0]
        timings: dict[str, float] = {}
        t = time.monotonic()
        address = args.address if executor == "ray" else None
        with Runner(executor, address, None if address else workers) as runner:
            rows = advise_prometheus(connect(url, at[0], at[-1], STEP_S), "", at, 0.05, runner, timings=timings)
        total = time.monotonic() - t
        first_rows = first_rows if first_rows is not None else rows
        r = {
            "executor": spec, "containers": len(rows), "fitted": timings["fitted"], "searched": timings["searched"],
            "fit_s": round(timings["fit_s"], 2), "search_s": round(timings["search_s"], 2), "total_s": round(total, 2),
            "fit_containers_per_s": round(timings["fitted"] / timings["fit_s"], 2),
            "search_containers_per_s": round(timings["searched"] / timings["search_s"], 2),
            "fit_cpu_s": round(timings["fit_cpu_s"], 2), "search_cpu_s": round(timings["search_cpu_s"], 2),
            "identical_rows": rows == first_rows, "load_average_1m_before": round(load, 1),
            "statuses": {s: sum(1 for x in rows if x["status"] == s) for s in sorted({x["status"] for x in rows})},
        }
        results.append(r)
        print(json.dumps(r), flush=True)
    server.shutdown()
    if args.out:
        Path(args.out).write_text(json.dumps({"cpus": os.cpu_count(), "windows": args.windows, "step_s": STEP_S, "runs": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
