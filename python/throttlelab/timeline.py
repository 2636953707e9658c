"""What a bandwidth trace (``_native.trace``) says over time: what each CPU did,
and each limited group's global and per-CPU runtime pools. Shared by the Perfetto
export and the HTML report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from throttlelab._native import trace as _native_trace

Trace = dict[str, Any]


@dataclass(frozen=True)
class Slice:
    """A CPU busy with one task (``kind`` "run"), or idle because groups are
    throttled on it (``kind`` "throttled"); idle time without throttling has no slice."""

    cpu: int
    start_ns: int
    end_ns: int
    kind: str
    label: str


def simulate(text: str, overrides: Iterable[str] = ()) -> tuple[dict[str, Any], Trace]:
    """Run a scenario with tracing; returns (output document, trace)."""
    doc = json.loads(_native_trace(text, list(overrides)))
    return doc["output"], doc["trace"]


def end_ns(output: dict[str, Any]) -> int:
    return round(output["duration_s"] * 1e9)


def limited_groups(trace: Trace) -> list[int]:
    """Groups (tg indices) that have a bandwidth limit: those with a period timer."""
    return sorted({r["tg"] for r in trace["records"] if r["kind"] == "refill"})


def cpu_slices(trace: Trace, until_ns: int) -> list[Slice]:
    """Per-CPU slices in time order, cut where the running task or the set of
    throttled groups changes; slices on one CPU never overlap."""
    running: dict[int, Optional[int]] = {}  # cpu -> thread id (None: idle)
    throttled: dict[int, set[int]] = {}  # cpu -> throttled tgs
    open_: dict[int, tuple[int, tuple[str, str]]] = {}  # cpu -> (start, (kind, label))
    slices: list[Slice] = []

    def state(cpu: int) -> Optional[tuple[str, str]]:
        if running.get(cpu) is not None:
            return "run", trace["threads"][running[cpu]]
        if throttled.get(cpu):
            return "throttled", "throttled " + ", ".join(trace["groups"][tg] for tg in sorted(throttled[cpu]))
        return None

    def close(cpu: int, t_ns: int) -> None:
        if cpu in open_:
            start, (kind, label) = open_.pop(cpu)
            if t_ns > start:
                slices.append(Slice(cpu, start, t_ns, kind, label))

    for r in trace["records"]:
        cpu, kind = r["cpu"], r["kind"]
        if cpu is None or kind not in ("switch", "throttle", "unthrottle"):
            continue
        before = state(cpu)
        if kind == "switch":
            running[cpu] = r["arg"]
        elif kind == "throttle":
            throttled.setdefault(cpu, set()).add(r["tg"])
        else:
            throttled.get(cpu, set()).discard(r["tg"])
        after = state(cpu)
        if after != before:
            close(cpu, r["t_ns"])
            if after is not None:
                open_[cpu] = (r["t_ns"], after)
    for cpu in list(open_):
        close(cpu, until_ns)
    slices.sort(key=lambda s: (s.start_ns, s.cpu))
    return slices


def pool_levels(trace: Trace) -> dict[tuple[int, Optional[int]], list[tuple[int, int]]]:
    """Runtime pool levels of the limited groups as steps: ``(tg, None)`` is the
    global pool, ``(tg, cpu)`` the group's runtime_remaining on ``cpu``; each series
    lists ``(t_ns, level_ns)`` where the level changes. A refill of a local pool
    shows the overrun it pays first (the level before the assign), as in 000 Fig. 4."""
    limited = set(limited_groups(trace))
    series: dict[tuple[int, Optional[int]], list[tuple[int, int]]] = {}

    def put(key: tuple[int, Optional[int]], t_ns: int, level: int) -> None:
        steps = series.setdefault(key, [])
        if not steps or steps[-1][1] != level:
            steps.append((t_ns, level))

    for r in trace["records"]:
        if r["tg"] not in limited:
            continue
        put((r["tg"], None), r["t_ns"], r["global_ns"])
        if r["cpu"] is not None and r["local_ns"] is not None:
            if r["kind"] == "assign":
                put((r["tg"], r["cpu"]), r["t_ns"], r["local_ns"] - r["arg"])
            put((r["tg"], r["cpu"]), r["t_ns"], r["local_ns"])
    return series


def instants(trace: Trace, kinds: Iterable[str]) -> list[dict[str, Any]]:
    """The records of the given kinds (e.g. refill, throttle), in time order."""
    wanted = set(kinds)
    return [r for r in trace["records"] if r["kind"] in wanted]
