#!/usr/bin/env python3
"""One run-2 workload's fit on run-2-merged's samples (prom5; prom6 keeps it, #35): its bands,
and every model's usage, throttled ratio and throttled share at each demand
tried, with its throttled seconds' miss (in units of its bound); the models
kept; and the worst and best kept model's throttled ratio at the limits named.
    python docs/prometheus-live/run-2-prom6/fit_row.py [NAME [LIMIT_M ...]]   (default: pgbench 300 406)
"""

import json
import sys
from pathlib import Path

from throttlelab.acceptance.prometheus_live import PREFIX, SELECTOR
from throttlelab.prometheus import Container, containers, steps
from throttlelab.prometheus_advise import Batched
from throttlelab.prometheus_fixture import Fixture
from throttlelab.prometheus_model import Fit, Plan, _measured, seconds_miss, throttled_share
from throttlelab.runner import Runner

RUN = Path(__file__).resolve().parent.parent / "run-2-merged"


def container(name: str) -> Container:
    """The workload's windows, as advise reads them from run-2-merged's samples."""
    plan = json.loads((RUN / "plan.json").read_text())
    fixture = Fixture(json.loads((RUN / "samples.json").read_text()))
    at = steps(plan["end_s"], 600, 30)
    (c,) = [c for c in containers(lambda q: fixture.query_range(q, at[0], at[-1], 30), SELECTOR, at) if c.labels["id"] == "/" + PREFIX + name]
    return c


def main(name: str, limits_m: list[int]) -> None:
    fit = Fit(container(name))
    print(f"threads {fit.counts}, node CPUs {fit.cpus}")
    for b in fit.bands:
        share = throttled_share(b.throttled_s, b.throttled_periods, min(max(fit.counts), fit.cpus), fit.period_us)
        print(f"band usage {b.usage_cpus:.3f} ratio {b.throttled_ratio:.3f} share {share:.3f} other {b.other_cpus:.2f} windows {b.windows}")
    with Runner("local", workers=2) as runner:
        batched = Batched(runner)
        while True:
            docs = batched.run_many(fit.runs())
            for (m, i, f), doc in zip(fit.slots, docs):
                usage, ratio, _ = _measured(doc)
                s = seconds_miss(fit.bands[i], doc, min(m.threads, fit.cpus), fit.period_us)
                cg = doc["cgroups"]["container"]
                sim_share = throttled_share(cg["throttled_usec"] / 1e6, cg["nr_throttled"], min(m.threads, fit.cpus), fit.period_us) if cg["nr_throttled"] else 0
                print(f"{m}: band {i} x{f:g}: usage {usage:.3f} ratio {ratio:.3f} share {sim_share:.3f} seconds-miss {s:.2f}")
            fit.take(docs)
            if fit.consistent or not fit.widen():
                break
        print("consistent:", [(str(v.model), [round(d, 3) for d in v.demands]) for v in fit.consistent])
        p = Plan(fit, 0.05)
        for quota in (m * 100 for m in limits_m):
            pred = p.outcome(batched.run_many(p.runs((quota, 100_000, 0))))
            print(f"at {quota / 100:.0f}m: worst {pred.throttled_ratio:.3f} best {pred.best_ratio:.3f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "pgbench", [int(a) for a in sys.argv[2:]] or [300, 406])
