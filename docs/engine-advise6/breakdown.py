"""Where the wall time of `advise request-service --max-throttled 5%` and
`reproduce --all` goes, on one worker, in-process (docs/engine.md, "Where
advise's time goes"):

    python breakdown.py advise     # the search: simulations, engine wall, Python per run
    python breakdown.py pool       # the local pool: start-up, cost per task without a simulation
    python breakdown.py reproduce  # every run of reproduce --all, serially; 2-worker packing

Prints JSON lines. Works on main's package and on later ones (it wraps
runner.simulate and Runner.run_many, which both have)."""

from __future__ import annotations

import importlib
import json
import sys
import time

runner = importlib.import_module("throttlelab.runner")
advise = importlib.import_module("throttlelab.advise")  # the module (throttlelab.advise is also a function)
from throttlelab import reproduce as experiments, scenario_text  # noqa: E402
from throttlelab.scenarios import load_scenario_text  # noqa: E402

#: An output of request-service's size (the pool's payload per run).
DOC = {"cgroups": {"app": {"nr_periods": 100, "nr_throttled": 5, "throttled_usec": 1, "throttled_ratio": 0.05,
       "usage_usec": 6000000}}, "tasks": {"svc": {"latency_us": {"p50": 1, "p90": 2, "p99": 3}}}, "duration_s": 10.0}


def noop(i: int) -> dict:
    return DOC


def timed_runs(fn):
    """Wrap runner.simulate: each run's call wall and engine wall."""
    calls = []
    simulate = runner.simulate

    def wrapped(*args, **kwargs):
        t0 = time.perf_counter()
        out = simulate(*args, **kwargs)
        calls.append((time.perf_counter() - t0, out["engine"]["wall_s"], len(json.dumps(out))))
        return out

    runner.simulate = wrapped
    try:
        t0 = time.perf_counter()
        result = fn()
        return result, time.perf_counter() - t0, calls
    finally:
        runner.simulate = simulate


def do_advise() -> None:
    batches = []
    run_many = runner.Runner.run_many

    def counted(self, runs, step=None):
        batches.append(len(runs))
        return run_many(self, runs, step)

    runner.Runner.run_many = counted
    result, wall, calls = timed_runs(lambda: advise.advise_text(scenario_text("request-service"), None, 0.05, workers=1))
    print(json.dumps({
        "advise": "request-service --max-throttled 5%", "workers": 1, "wall_s": round(wall, 3),
        "simulations": len(calls), "runs_judged": result["runs"], "batches": len(batches),
        "engine_s": round(sum(c[1] for c in calls), 3), "call_s": round(sum(c[0] for c in calls), 3),
        "python_per_run_us": round(1e6 * sum(c[0] - c[1] for c in calls) / len(calls)),
        "outside_runs_s": round(wall - sum(c[0] for c in calls), 3),
    }))


def do_pool() -> None:
    for _ in range(3):
        t0 = time.perf_counter()
        with runner.Runner(workers=2) as pool:
            pool.map(noop, [(0,), (1,)])
            t1 = time.perf_counter()
            pool.map(noop, [(i,) for i in range(543)])
            t2 = time.perf_counter()
        print(json.dumps({"pool": 2, "start_and_2_tasks_ms": round(1e3 * (t1 - t0), 1), "tasks": 543,
                          "per_task_us": round(1e6 * (t2 - t1) / 543)}))


def pack(times: list[float], workers: int = 2) -> float:
    """The wall of ``times`` on ``workers`` taken in order, each run to the first free worker."""
    free = [0.0] * workers
    for t in times:
        i = free.index(min(free))
        free[i] += t
    return max(free)


def do_reproduce() -> None:
    per_run = []
    for e in experiments.EXPERIMENTS.values():
        def every_run() -> None:
            for case in e.cases:
                text, _ = load_scenario_text(case.scenario or e.scenario)
                for per_seed in e.runs(case):
                    for sets in per_seed:
                        runner.simulate(text, sets)

        _, wall, calls = timed_runs(every_run)
        per_run.append((e.name, calls))
        print(json.dumps({
            "experiment": e.name, "runs": len(calls), "call_s": round(sum(c[0] for c in calls), 3),
            "engine_s": round(sum(c[1] for c in calls), 3), "json_kb": round(sum(c[2] for c in calls) / 1e3, 1),
            "longest_run_s": round(max(c[0] for c in calls), 3),
        }))
    every = [c[0] for _, calls in per_run for c in calls]
    print(json.dumps({
        "reproduce": "--all", "runs": len(every), "serial_s": round(sum(every), 2),
        "2_workers_batch_per_experiment_s": round(sum(pack([c[0] for c in calls]) for _, calls in per_run), 2),
        "2_workers_one_batch_s": round(pack(every), 2), "2_workers_ideal_s": round(sum(every) / 2, 2),
    }))


if __name__ == "__main__":
    {"advise": do_advise, "pool": do_pool, "reproduce": do_reproduce}[sys.argv[1]]()
