"""``throttlelab trace``: a simulation as a Chrome/Perfetto JSON trace
(https://ui.perfetto.dev opens it), written as the simulation runs.

Process 1 "CPUs" has one track per CPU with what ran there (slices named by task)
and when it sat idle because a group was throttled on it ("throttled <cgroup>").
Process 2 "bandwidth" has the runtime pools as counters in ms (each limited
group's global pool and its runtime_remaining per CPU) and the period-timer
refills and slack distributions as instant events.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, TextIO

from throttlelab.timeline import CpuSlices, PoolKey, PoolLevels, Slice, Trace, instants

CPUS_PID = 1
BANDWIDTH_PID = 2

Event = dict[str, Any]


def _us(t_ns: int) -> float:
    return t_ns / 1e3


def _metadata(cpus: int) -> list[Event]:
    events: list[Event] = [
        {"ph": "M", "name": "process_name", "pid": CPUS_PID, "args": {"name": "CPUs"}},
        {"ph": "M", "name": "process_name", "pid": BANDWIDTH_PID, "args": {"name": "bandwidth"}},
    ]
    events += [
        {"ph": "M", "name": "thread_name", "pid": CPUS_PID, "tid": cpu, "args": {"name": f"CPU {cpu}"}}
        for cpu in range(cpus)
    ]
    events += [
        {"ph": "M", "name": "thread_sort_index", "pid": CPUS_PID, "tid": cpu, "args": {"sort_index": cpu}}
        for cpu in range(cpus)
    ]
    return events


def _slice(s: Slice) -> Event:
    return {
        "ph": "X", "name": s.label, "cat": s.kind, "pid": CPUS_PID, "tid": s.cpu,
        "ts": _us(s.start_ns), "dur": _us(s.end_ns - s.start_ns),
    }


def _level(groups: list[str], step: tuple[PoolKey, int, int]) -> Event:
    (tg, cpu), t_ns, level_ns = step
    name = f"{groups[tg]} global pool" if cpu is None else f"{groups[tg]} local pool CPU {cpu}"
    return {"ph": "C", "name": name, "pid": BANDWIDTH_PID, "ts": _us(t_ns), "args": {"ms": level_ns / 1e6}}


def _instant(groups: list[str], r: dict[str, Any]) -> Event:
    return {
        "ph": "i", "s": "p", "name": f"{r['kind']} {groups[r['tg']]}", "pid": BANDWIDTH_PID,
        "ts": _us(r["t_ns"]), "args": {"global_ms": r["global_ns"] / 1e6},
    }


def chrome_events(chunks: Iterable[tuple[int, Trace]], limited: Iterable[int], from_ns: int = 0) -> Iterator[list[Event]]:
    """The trace events of a traced run's chunks from ``from_ns`` on, a list per
    chunk (not in time order: the format does not ask for it); timestamps are
    microseconds (floats), as the format requires. ``limited`` are the groups
    whose pools get counters."""
    cpu_slices, pools = CpuSlices(from_ns), PoolLevels(limited, from_ns)
    groups: list[str] = []
    until_ns = from_ns
    for until_ns, chunk in chunks:  # the last chunk comes at the run's end
        if not groups:
            groups = chunk["groups"]
            yield _metadata(chunk["cpus"])
        yield (
            [_slice(s) for s in cpu_slices.feed(chunk)]
            + [_level(groups, step) for step in pools.feed(chunk)]
            + [_instant(groups, r) for r in instants(chunk, ("refill", "slack_distribute"), from_ns)]
        )
    yield [_slice(s) for s in cpu_slices.close(until_ns)] + [_level(groups, step) for step in pools.close()]


def write_json(f: TextIO, batches: Iterable[list[Event]]) -> int:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ns"}`` to ``f`` batch by
    batch, so that only one batch is ever in memory; returns the number of events."""
    f.write('{"displayTimeUnit":"ns","traceEvents":[')
    count = 0
    for events in batches:
        if events:
            f.write(("," if count else "") + ",".join(json.dumps(e, separators=(",", ":")) for e in events))
            count += len(events)
    f.write("]}\n")
    return count
