"""Timing of built-in scenarios for ``throttlelab bench``."""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any

from rich.table import Table

from throttlelab._native import run as _native_run
from throttlelab.scenarios import load_scenario_text
from throttlelab.terminal import table


def measure(name: str, repeat: int = 1) -> dict[str, Any]:
    """Run scenario ``name`` ``repeat`` times; report the fastest run.

    ``wall_s`` is the whole native call (parse, simulate, serialise), timed here so
    that it means the same for every scenario; the minimum over repeats is the least
    disturbed by the rest of the machine.
    """
    text, _ = load_scenario_text(name)
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
        "sim_s": doc["duration_s"],
        "wall_s": best,
        "events": events,
        "events_per_s": events / best,
        # Simulated seconds per wall second (`speedup`, its older name, is kept).
        "sim_s_per_wall_s": doc["duration_s"] / best,
        "speedup": doc["duration_s"] / best,
        "peak_rss_mb": peak_rss_mb(),
    }


def peak_rss_mb() -> float:
    """The process's peak resident memory so far (``ru_maxrss``), in MiB: the
    interpreter's own (some 50 MiB) and the largest run's, since it only grows.
    Bench one scenario per process for the scenario's own peak."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10


def render(records: list[dict[str, Any]], repeat: int) -> Table:
    t = table(
        f"bench (best of {repeat})", ("scenario", "sim s", "wall s", "events", "events/s", "sim s / wall s", "peak MiB"),
        left=("scenario",),
    )
    for r in records:
        t.add_row(
            r["scenario"], f"{r['sim_s']:g}", f"{r['wall_s']:.3f}", str(r["events"]),
            f"{r['events_per_s']:,.0f}", f"{r['sim_s_per_wall_s']:,.1f}x", f"{r['peak_rss_mb']:.0f}",
        )
    return t
