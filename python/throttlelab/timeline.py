"""What a bandwidth trace (``_native.trace``) says over time: what each CPU did,
and each limited group's global and per-CPU runtime pools. Shared by the Perfetto
export and the HTML report.

The native side hands the trace over in chunks (``{"cpus", "groups", "threads",
"records"}``, each with the records since the previous one), so that a long run
never sits in memory. ``CpuSlices`` and ``PoolLevels`` fold chunks in order and
return what they can already tell; both draw from a window's start on: records
before it (the native side keeps only those that still say what ran, what was
throttled and the pool levels then) only set the state.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional

from throttlelab._native import trace as _native_trace

Trace = dict[str, Any]
#: A pool: ``(tg, None)`` is the group's global pool, ``(tg, cpu)`` its runtime_remaining on ``cpu``.
PoolKey = tuple[int, Optional[int]]


@dataclass(frozen=True)
class Slice:
    """A CPU busy with one task (``kind`` "run"), or idle because groups are
    throttled on it (``kind`` "throttled"); idle time without throttling has no slice."""

    cpu: int
    start_ns: int
    end_ns: int
    kind: str
    label: str


class TracedRun:
    """A traced simulation of ``[from_ns, to_ns]`` (the run stops at ``to_ns``):
    iterate for ``(now_ns, chunk)``, the simulated time reached and the chunk of
    trace up to it; then ``output()`` is the output document."""

    def __init__(self, text: str, overrides: Iterable[str] = (), from_ns: int = 0, to_ns: Optional[int] = None) -> None:
        window = {"from_ns": from_ns} | ({} if to_ns is None else {"to_ns": to_ns})
        self._native = _native_trace(text, list(overrides), **window)

    def __iter__(self) -> Iterator[tuple[int, Trace]]:
        for now_ns, chunk in self._native:
            yield now_ns, json.loads(chunk)

    def output(self) -> dict[str, Any]:
        return json.loads(self._native.output())


def simulate(text: str, overrides: Iterable[str] = ()) -> tuple[dict[str, Any], Trace]:
    """Run a whole scenario with tracing; returns (output document, the whole trace)."""
    run = TracedRun(text, overrides)
    chunks = iter(run)
    _, trace = next(chunks)  # the run's end always sends one
    for _, chunk in chunks:
        trace["records"] += chunk["records"]
    return run.output(), trace


def end_ns(output: dict[str, Any]) -> int:
    return round(output["duration_s"] * 1e9)


def limited_groups(resolved: dict[str, Any]) -> list[int]:
    """Groups (tg indices) of a resolved scenario (``_native.validate``) that have a
    bandwidth limit (a quota, neither absent nor -1)."""
    return [i + 1 for i, cg in enumerate(resolved["cgroups"]) if cg["quota_us"] is not None]


class CpuSlices:
    """Per-CPU slices from ``from_ns`` on, cut where the running task or the set of
    throttled groups changes; slices on one CPU never overlap. A slice is
    returned once it has ended."""

    def __init__(self, from_ns: int = 0) -> None:
        self.from_ns = from_ns
        self.running: dict[int, Optional[int]] = {}  # cpu -> thread id (None: idle)
        self.throttled: dict[int, set[int]] = {}  # cpu -> throttled tgs
        self.open: dict[int, tuple[int, tuple[str, str]]] = {}  # cpu -> (start, (kind, label))

    def _state(self, cpu: int, chunk: Trace) -> Optional[tuple[str, str]]:
        if self.running.get(cpu) is not None:
            return "run", chunk["threads"][self.running[cpu]]
        if self.throttled.get(cpu):
            return "throttled", "throttled " + ", ".join(chunk["groups"][tg] for tg in sorted(self.throttled[cpu]))
        return None

    def _close(self, cpu: int, t_ns: int, into: list[Slice]) -> None:
        if cpu in self.open:
            start, (kind, label) = self.open.pop(cpu)
            start = max(start, self.from_ns)
            if t_ns > start:
                into.append(Slice(cpu, start, t_ns, kind, label))

    def feed(self, chunk: Trace) -> list[Slice]:
        slices: list[Slice] = []
        for r in chunk["records"]:
            cpu, kind = r["cpu"], r["kind"]
            if cpu is None or kind not in ("switch", "throttle", "unthrottle"):
                continue
            before = self._state(cpu, chunk)
            if kind == "switch":
                self.running[cpu] = r["arg"]
            elif kind == "throttle":
                self.throttled.setdefault(cpu, set()).add(r["tg"])
            else:
                self.throttled.get(cpu, set()).discard(r["tg"])
            after = self._state(cpu, chunk)
            if after != before:
                self._close(cpu, r["t_ns"], slices)
                if after is not None:
                    self.open[cpu] = (r["t_ns"], after)
        return slices

    def close(self, until_ns: int) -> list[Slice]:
        """The slices still open, ended at ``until_ns``."""
        slices: list[Slice] = []
        for cpu in list(self.open):
            self._close(cpu, until_ns, slices)
        return slices


class PoolLevels:
    """Runtime pool levels of the groups ``tgs`` as steps ``(pool, t_ns, level_ns)``
    where a level changes, from ``from_ns`` on (the level in force then comes
    first, at ``from_ns``). A refill of a local pool shows the overrun it pays
    first (the level before the assign), as in 000 Fig. 4."""

    def __init__(self, tgs: Iterable[int], from_ns: int = 0) -> None:
        self.tgs = set(tgs)
        self.from_ns = from_ns
        self.level: dict[PoolKey, int] = {}
        self.started = False

    def _put(self, key: PoolKey, t_ns: int, level: int, into: list[tuple[PoolKey, int, int]]) -> None:
        if self.level.get(key) != level:
            self.level[key] = level
            if t_ns >= self.from_ns:
                into.append((key, t_ns, level))

    def _start(self, into: list[tuple[PoolKey, int, int]]) -> None:
        if not self.started:
            self.started = True
            into += [(key, self.from_ns, level) for key, level in self.level.items()]

    def feed(self, chunk: Trace) -> list[tuple[PoolKey, int, int]]:
        steps: list[tuple[PoolKey, int, int]] = []
        for r in chunk["records"]:
            if r["tg"] not in self.tgs:
                continue
            if r["t_ns"] >= self.from_ns:
                self._start(steps)
            self._put((r["tg"], None), r["t_ns"], r["global_ns"], steps)
            if r["cpu"] is not None and r["local_ns"] is not None:
                if r["kind"] == "assign":
                    self._put((r["tg"], r["cpu"]), r["t_ns"], r["local_ns"] - r["arg"], steps)
                self._put((r["tg"], r["cpu"]), r["t_ns"], r["local_ns"], steps)
        return steps

    def close(self) -> list[tuple[PoolKey, int, int]]:
        """The levels at the window's start, if no record in the window came to say them."""
        steps: list[tuple[PoolKey, int, int]] = []
        self._start(steps)
        return steps


def instants(chunk: Trace, kinds: Iterable[str], from_ns: int = 0) -> list[dict[str, Any]]:
    """The records of the given kinds (e.g. refill, throttle) from ``from_ns`` on, in time order."""
    wanted = set(kinds)
    return [r for r in chunk["records"] if r["kind"] in wanted and r["t_ns"] >= from_ns]


def cpu_slices(trace: Trace, until_ns: int) -> list[Slice]:
    """Every slice of a whole trace, in order of start."""
    fold = CpuSlices()
    return sorted(fold.feed(trace) + fold.close(until_ns), key=lambda s: (s.start_ns, s.cpu))


def pool_levels(trace: Trace, tgs: Iterable[int]) -> dict[PoolKey, list[tuple[int, int]]]:
    """Every pool level step of the groups ``tgs`` in a whole trace, by pool."""
    series: dict[PoolKey, list[tuple[int, int]]] = {}
    for key, t_ns, level in PoolLevels(tgs).feed(trace):
        series.setdefault(key, []).append((t_ns, level))
    return series


def throttled_intervals(trace: Trace, tg: int, until_ns: int) -> list[tuple[int, int, int]]:
    """``(cpu, start_ns, end_ns)`` of every throttle of group ``tg``."""
    since: dict[int, int] = {}
    spans = []
    for r in instants(trace, ("throttle", "unthrottle")):
        if r["tg"] != tg:
            continue
        if r["kind"] == "throttle":
            since[r["cpu"]] = r["t_ns"]
        elif r["cpu"] in since:
            spans.append((r["cpu"], since.pop(r["cpu"]), r["t_ns"]))
    spans += [(cpu, start, until_ns) for cpu, start in since.items()]
    return spans


def running_intervals(trace: Trace, groups: set[int], until_ns: int) -> Iterator[tuple[int, int]]:
    """``(start_ns, end_ns)`` of every stretch a thread of ``groups`` ran on a CPU."""
    since: dict[int, int] = {}  # cpu -> when one of the groups' threads began to run
    for r in trace["records"]:
        if r["kind"] != "switch" or r["cpu"] is None:
            continue
        start = since.pop(r["cpu"], None)
        if start is not None:
            yield start, r["t_ns"]
        if r["arg"] is not None and r["tg"] in groups:
            since[r["cpu"]] = r["t_ns"]
    for start in since.values():
        yield start, until_ns


def time_per_bin_ns(bounds: list[int], spans: Iterable[tuple[int, int]]) -> list[int]:
    """How much of ``spans`` falls in each bin ``[bounds[i], bounds[i + 1])``
    (added up where spans overlap, as over CPUs)."""
    bins = [0] * (len(bounds) - 1)
    for start, end in spans:
        i = max(0, bisect.bisect_right(bounds, start) - 1)
        while i < len(bins) and bounds[i] < end:
            bins[i] += max(0, min(end, bounds[i + 1]) - max(start, bounds[i]))
            i += 1
    return bins


def subtree(trace: Trace, groups: dict[str, dict[str, Any]], name: str) -> set[int]:
    """The task groups (trace indices) of cgroup ``name`` and its descendants."""

    def under(g: str) -> bool:
        while g:
            if g == name:
                return True
            g = groups[g]["parent"] or ""
        return False

    return {tg for tg, g in enumerate(trace["groups"]) if g in groups and under(g)}
