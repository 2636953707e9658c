"""Timing of built-in scenarios for ``throttlelab bench``.

Each scenario is timed in a fresh interpreter of its own (``python -m
throttlelab.bench NAME RUNS``), so that its peak memory is its own and not the
largest of the scenarios timed before it in one process.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from throttlelab._native import run as _native_run
from throttlelab.runner import RunFailed
from throttlelab.scenarios import load_scenario_text
from throttlelab.terminal import table

if TYPE_CHECKING:
    from rich.table import Table


def measure(name: str, repeat: int = 1) -> dict[str, Any]:
    """Scenario ``name``'s record (:func:`measure_here`), timed in a fresh process;
    :class:`RunFailed` if that process dies (the OOM killer, say)."""
    proc = subprocess.run(
        [sys.executable, "-m", "throttlelab.bench", name, str(repeat)], capture_output=True, text=True,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise RunFailed(f"bench {name} failed: {last}", -proc.returncode if proc.returncode < 0 else None)
    return json.loads(proc.stdout)


def measure_here(name: str, repeat: int = 1) -> dict[str, Any]:
    """Run scenario ``name`` ``repeat`` times in this process; report the fastest run.

    ``wall_s`` is the whole native call (parse, simulate, serialise), timed here so
    that it means the same for every scenario; the minimum over repeats is the least
    disturbed by the rest of the machine. ``peak_rss_mb`` is this process's peak
    resident memory (``ru_maxrss``) after the runs, ``base_rss_mb`` the same before
    the first: the interpreter and the module, so the run's own is the difference.
    """
    text, _ = load_scenario_text(name)
    base = peak_rss_mb()
    best = None
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        out = _native_run(text)
        wall = time.perf_counter() - start
        best = wall if best is None else min(best, wall)
    doc = json.loads(out)
    events = doc["engine"]["events"]
    return {
        "scenario": name,
        "runs": max(1, repeat),
        "sim_s": doc["duration_s"],
        "wall_s": best,
        "events": events,
        "events_per_s": events / best,
        # Simulated seconds per wall second (`speedup`, its older name, is kept).
        "sim_s_per_wall_s": doc["duration_s"] / best,
        "speedup": doc["duration_s"] / best,
        "peak_rss_mb": peak_rss_mb(),
        "base_rss_mb": base,
    }


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (``ru_maxrss``), in MiB."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10


def render(records: list[dict[str, Any]], repeat: int) -> Table:
    t = table(
        f"bench (best of {repeat})",
        ("scenario", "sim s", "wall s", "events", "events/s", "sim s / wall s", "peak MiB", "base MiB"),
        left=("scenario",),
    )
    for r in records:
        t.add_row(
            r["scenario"], f"{r['sim_s']:g}", f"{r['wall_s']:.3f}", str(r["events"]),
            f"{r['events_per_s']:,.0f}", f"{r['sim_s_per_wall_s']:,.1f}x", f"{r['peak_rss_mb']:.0f}",
            f"{r['base_rss_mb']:.0f}",
        )
    return t


if __name__ == "__main__":  # one scenario's record, for measure()
    print(json.dumps(measure_here(sys.argv[1], int(sys.argv[2]))))
