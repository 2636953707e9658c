"""Many seeds of one scenario at 2 workers: the runner's process pool against
threads in one process (the core releases the GIL while it simulates).

Two loads: many cheap runs (``request-service``, about 10 ms each) and a few
big ones (``bench-busy-64cpu``, about 1 s each). For each, the best of REPEAT:

- serial: one ``simulate`` after another in this process (the reference);
- processes, cold: a fresh ``Runner(workers=2)`` (what ``compare`` and
  ``explain`` start per command), its workers' start-up included;
- processes, warm: a second ``run_many`` on that runner (``advise`` keeps one
  runner for all its rounds);
- threads: ``ThreadPoolExecutor(2)`` over ``simulate``, in order.

Every executor's outputs are checked byte-identical (as JSON) to the serial ones.
Run (on an idle host): ``tl-measure python scripts/parallel_seeds.py [REPEAT]``.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from throttlelab.runner import Run, Runner, simulate
from throttlelab.scenarios import load_scenario_text

WORKERS = 2
REPEAT = 3
LOADS = {
    "request-service": (400, []),
    "bench-busy-64cpu": (8, []),
}


def best(fn: Callable[[], list[Any]]) -> tuple[float, list[Any]]:
    """The fastest of REPEAT calls of ``fn``, and its results."""
    times, out = [], None
    for _ in range(REPEAT):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def serial(runs: list[Run]) -> list[Any]:
    return [simulate(*r) for r in runs]


def processes_cold(runs: list[Run]) -> list[Any]:
    with Runner(workers=WORKERS) as runner:
        return runner.run_many(runs)


def threads(runs: list[Run]) -> list[Any]:
    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(lambda r: simulate(*r), runs))


def main() -> int:
    global REPEAT
    REPEAT = int(sys.argv[1]) if len(sys.argv) > 1 else REPEAT
    ok = True
    for name, (seeds, sets) in LOADS.items():
        text, _ = load_scenario_text(name)
        runs = [Run(text, [*sets, f"seed={s}"]) for s in range(1, seeds + 1)]
        simulate(*runs[0])  # parse once (document() caches it), as a real command would have
        ref_s, ref = best(lambda: serial(runs))
        cold_s, cold = best(lambda: processes_cold(runs))
        with Runner(workers=WORKERS) as runner:
            runner.run_many(runs[:WORKERS])  # start the workers
            warm_s, warm = best(lambda: runner.run_many(runs))
        thr_s, thr = best(lambda: threads(runs))
        events = sum(d["engine"]["events"] for d in ref)
        print(f"{name}: {seeds} seeds, {events / seeds:,.0f} events a run, best of {REPEAT}, {WORKERS} workers")
        for label, wall, out in (("serial", ref_s, ref), ("processes, cold", cold_s, cold),
                                 ("processes, warm", warm_s, warm), ("threads", thr_s, thr)):
            same = [_strip(d) for d in out] == [_strip(d) for d in ref]
            ok &= same
            print(f"  {label:16s} {wall:7.3f} s  {ref_s / wall:4.2f}x serial  identical={same}")
    return 0 if ok else 1


def _strip(doc: dict[str, Any]) -> str:
    """The output without its timing block, as bytes to compare."""
    return json.dumps({k: v for k, v in doc.items() if k != "engine"})


if __name__ == "__main__":
    sys.exit(main())
