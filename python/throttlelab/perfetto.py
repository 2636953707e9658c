"""``throttlelab trace``: a simulation as a Chrome/Perfetto JSON trace
(https://ui.perfetto.dev opens it).

Process 1 "CPUs" has one track per CPU with what ran there (slices named by task)
and when it sat idle because a group was throttled on it ("throttled <cgroup>").
Process 2 "bandwidth" has the runtime pools as counters in ms (each limited
group's global pool and its runtime_remaining per CPU) and the period-timer
refills and slack distributions as instant events.
"""

from __future__ import annotations

from typing import Any

from throttlelab.timeline import Trace, cpu_slices, instants, pool_levels

CPUS_PID = 1
BANDWIDTH_PID = 2


def _us(t_ns: int) -> float:
    return t_ns / 1e3


def chrome_trace(trace: Trace, until_ns: int) -> dict[str, Any]:
    """The trace document: ``{"traceEvents": [...], "displayTimeUnit": "ns"}``;
    timestamps are microseconds (floats), as the format requires."""
    groups = trace["groups"]
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": CPUS_PID, "args": {"name": "CPUs"}},
        {"ph": "M", "name": "process_name", "pid": BANDWIDTH_PID, "args": {"name": "bandwidth"}},
    ]
    events += [
        {"ph": "M", "name": "thread_name", "pid": CPUS_PID, "tid": cpu, "args": {"name": f"CPU {cpu}"}}
        for cpu in range(trace["cpus"])
    ]
    events += [
        {"ph": "M", "name": "thread_sort_index", "pid": CPUS_PID, "tid": cpu, "args": {"sort_index": cpu}}
        for cpu in range(trace["cpus"])
    ]
    for s in cpu_slices(trace, until_ns):
        events.append({
            "ph": "X", "name": s.label, "cat": s.kind, "pid": CPUS_PID, "tid": s.cpu,
            "ts": _us(s.start_ns), "dur": _us(s.end_ns - s.start_ns),
        })
    for (tg, cpu), steps in sorted(pool_levels(trace).items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1])):
        name = f"{groups[tg]} global pool" if cpu is None else f"{groups[tg]} local pool CPU {cpu}"
        events += [
            {"ph": "C", "name": name, "pid": BANDWIDTH_PID, "ts": _us(t_ns), "args": {"ms": level_ns / 1e6}}
            for t_ns, level_ns in steps
        ]
    for r in instants(trace, ("refill", "slack_distribute")):
        events.append({
            "ph": "i", "s": "p", "name": f"{r['kind']} {groups[r['tg']]}", "pid": BANDWIDTH_PID,
            "ts": _us(r["t_ns"]), "args": {"global_ms": r["global_ns"] / 1e6},
        })
    return {"traceEvents": events, "displayTimeUnit": "ns"}
