"""Speedup of `throttlelab sweep --executor ray` with 2 local Ray workers against 1.

A sweep of 16 seeds of bench-64cpu at 250 simulated seconds (about 0.5 s of wall
time per run). Each worker count gets its own local Ray instance, warmed up by one
run per worker, so that the timing holds the sweep and not Ray's start.
Run: python scripts/sweep_speedup.py
"""

from __future__ import annotations

import time

import ray

from throttlelab.scenarios import load_scenario_text
from throttlelab.sweep import sweep_rows

SETS = ["duration_s=250"]
GRID = {"seed": list(range(1, 17))}
REPEAT = 3


def best_wall_s(workers: int) -> float:
    """The fastest of REPEAT sweeps on a local Ray instance with ``workers`` CPUs."""
    text, _ = load_scenario_text("bench-64cpu")
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        sweep_rows(text, {"seed": list(range(1, workers + 1))}, ["duration_s=1"], "ray")  # warm-up
        times = []
        for _ in range(REPEAT):
            start = time.perf_counter()
            sweep_rows(text, GRID, SETS, "ray")
            times.append(time.perf_counter() - start)
        return min(times)
    finally:
        ray.shutdown()


def main() -> None:
    one, two = best_wall_s(1), best_wall_s(2)
    print(f"16 runs of bench-64cpu (250 s simulated each), best of {REPEAT}:")
    print(f"  1 worker : {one:.2f} s ({one / 16:.2f} s per run)")
    print(f"  2 workers: {two:.2f} s")
    print(f"  speedup  : {one / two:.2f}x")


if __name__ == "__main__":
    main()
