"""Timing of built-in scenarios for ``throttlelab bench``."""

from __future__ import annotations

import json
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
        "speedup": doc["duration_s"] / best,
    }


def render(records: list[dict[str, Any]], repeat: int) -> Table:
    t = table(f"bench (best of {repeat})", ("scenario", "sim s", "wall s", "events", "events/s", "speedup"), left=("scenario",))
    for r in records:
        t.add_row(
            r["scenario"], f"{r['sim_s']:g}", f"{r['wall_s']:.3f}", str(r["events"]),
            f"{r['events_per_s']:,.0f}", f"{r['speedup']:,.1f}x",
        )
    return t
