"""``throttlelab diff``: bandwidth control traced event by event, kernel against simulator.

The kernel runs the scenario with its own bandwidth events recorded around the
run (``throttlelab-real --bw-trace``: crates/throttlelab-real/src/bw_trace.rs);
the simulator runs paired to each kernel run (started where it started, its
period timer where the kernel had it, the run's background, work speed and
tick lateness: ``Scenario::set_like`` with ``placed``) with its bandwidth trace
on (crates/throttlelab-core/src/trace.rs). Both become streams of
:class:`Event` in ns since the run's start, of the kinds in ``KINDS``. They
are cut into periods at each side's period-timer expiries (the refill, the
natural anchor), period i of one side held against period i of the other, and
per period, kind and CPU the events are paired in order: the first pair that
differs in number, in time from its period's start, or in amount, beyond
``tolerance``, is the first divergence. docs/diff.md says what each source of
the kernel's events can see.
"""

from __future__ import annotations

import bisect
import json
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

from throttlelab import _native, vm
from throttlelab.compare import SETTLE_S
from throttlelab.perfetto import write_json
from throttlelab.terminal import table
from throttlelab.worker import CONTROLLER

if TYPE_CHECKING:
    from rich.console import RenderableType

#: The kinds of events compared, in the order a period shows them.
KINDS = ("refill", "assign", "return", "throttle", "unthrottle", "distribute", "slack_timer")
#: Kinds whose amount (ns) is compared: runtime granted, returned, distributed,
#: and the global pool right after a refill.
AMOUNTS = {"refill", "assign", "return", "distribute"}
#: Default tolerance, in us of time (from the period's start) and of runtime.
TOLERANCE_US = 250.0
#: Comms of our processes as the kernel shows them (16 bytes with the NUL).
WORKER_COMM = "throttlelab-wor"
OUR_COMMS = ("throttlelab-wor", "throttlelab-rea")
#: The hrtimer callbacks of the tick (6.18 names it tick_nohz_handler, 6.12 tick_sched_timer).
TICK_TIMERS = ("tick_nohz_handler", "tick_sched_timer")


class DiffError(Exception):
    """A scenario ``diff`` cannot trace, or a trace it cannot read (one line)."""


@dataclass(frozen=True)
class Event:
    """One bandwidth event: ``t_ns`` since the run's start, on a cfs_rq's
    ``cpu`` (None: the group's global pool or its timers), with the runtime
    it moved (``amount_ns``; for a refill, the pool after it)."""

    t_ns: int
    kind: str
    cpu: Optional[int] = None
    amount_ns: Optional[int] = None

    def text(self, anchor_ns: int) -> str:
        cpu = "" if self.cpu is None else f" CPU {self.cpu}"
        amount = "" if self.amount_ns is None else f" {self.amount_ns / 1e3:,.1f} us"
        return f"{(self.t_ns - anchor_ns) / 1e6:+8.3f} ms {self.kind}{cpu}{amount}"


@dataclass
class Stream:
    """One side's events in time order, and the kinds its source sees (a
    kind it cannot see is not compared)."""

    events: list[Event]
    kinds: tuple[str, ...]
    notes: list[str] = field(default_factory=list)
    #: Periods the period timer's expiries covered beyond one each (an
    #: expiry late past whole periods refills once and counts them all in
    #: nr_periods), where known.
    overruns: int = 0


# --- the kernel's side: tracefs text ------------------------------------------------

_LINE = re.compile(r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?P<flags>\S+)\s+"
                   r"(?P<ts>\d+)\.(?P<frac>\d+):\s+(?P<event>\w+):\s?(?P<body>.*)$")
_FIELD = re.compile(r"(\w+)=(\S+)")


def _fields(body: str) -> dict[str, str]:
    return dict(_FIELD.findall(body))


def _int(fields: dict[str, str], key: str) -> Optional[int]:
    try:
        return int(fields[key], 0)
    except (KeyError, ValueError):
        return None


def event_comms(text: str) -> dict[int, str]:
    """pid -> comm as the events name them in their own fields (``sched_switch``'s
    prev and next, ``sched_wakeup``'s and ``sched_waking``'s), recorded with
    each event, not looked up when the text is printed."""
    comms: dict[int, str] = {}
    for m in re.finditer(r"\b(prev_comm|next_comm|comm)=(\S+) (?:prev_pid|next_pid|pid)=(\d+)", text):
        comms[int(m[3])] = m[2]
    return comms


def parse_lines(text: str) -> Iterable[tuple[int, int, str, int, str, dict[str, str]]]:
    """``(t_ns, cpu, comm, pid, event, fields)`` of each event line of a
    tracefs text; a probe's location (``(caller+0x1/0x2 <- function)``) is
    field ``at``, the irq-state flags (``d.h1.``) field ``flags``. A line's
    comm is looked up in the kernel's saved_cmdlines cache when the text is
    read, which a busy host's many short processes evict ours from (``<...>``)
    or which kept a pid's comm from before its exec (``python``): where the
    events' own fields name the pid, that name is taken."""
    comms = event_comms(text)
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        frac = m["frac"]
        t_ns = int(m["ts"]) * 1_000_000_000 + int(frac) * 10 ** (9 - len(frac))
        fields = _fields(m["body"])
        fields["flags"] = m["flags"]
        if m["body"].startswith("("):
            fields["at"] = m["body"][1:].split(")", 1)[0]
        comm = comms.get(int(m["pid"]), m["comm"].strip())
        yield t_ns, int(m["cpu"]), comm, int(m["pid"]), m["event"], fields


def probes_set(text: str) -> dict[str, str]:
    """The probes the trace's header says were set (bw_trace.rs's ``# probe
    NAME: KIND FUNCTION ARGS...``): their functions by name."""
    return {m[1]: m[2] for m in re.finditer(r"^# probe (\w+): [pr] (\S+)", text, re.M)}


def worker_ticks(text: str) -> list[tuple[int, int, int]]:
    """``(expiry ns, cpu, lateness ns)`` of the tick's timer where it
    interrupted a worker thread (the ticks that charge a group; an idle CPU's
    wake-up under TCG can take milliseconds): each ``hrtimer_expire_entry``'s
    ``now`` against the expiry its last ``hrtimer_start`` set."""
    expires: dict[str, int] = {}
    ticks: list[tuple[int, int, int]] = []
    for _t, cpu, comm, _pid, event, f in parse_lines(text):
        if f.get("function") not in TICK_TIMERS:
            continue
        at, now = _int(f, "expires"), _int(f, "now")
        if event == "hrtimer_start" and at is not None:
            expires[f["hrtimer"]] = at
        elif event == "hrtimer_expire_entry" and f["hrtimer"] in expires and now is not None:
            expired = expires.pop(f["hrtimer"])
            if comm == WORKER_COMM:
                ticks.append((expired, cpu, now - expired))
    return ticks


def tick_latency_us(ticks: list[tuple[int, int, int]]) -> Optional[float]:
    """The median lateness of the worker ticks' timer (``worker_ticks``), or
    None without such ticks. Medians here are the upper one, as the probe's."""
    late = [ns for _at, _cpu, ns in ticks]
    return statistics.median_high(late) / 1e3 if late else None


#: A worker tick later than this is late beyond the jitter (``tick_late``):
#: the probe's threshold, from the core (``TickLateness::LATE_NS``).
TICK_LATE_NS = _native.TICK_LATE_NS


def tick_late(ticks: list[tuple[int, int, int]], tick_ns: int) -> Optional[dict[str, float]]:
    """The worker ticks later than ``TICK_LATE_NS`` (``host.tick_late``, the
    simulator's ``machine.tick_late_*``): their share, how late beyond the
    ticks' median they ran (the median of them; the simulator adds the
    jitter on top), and the share of them whose tick (the same expiry) was
    late on the other CPU too. A tick a whole tick late or more ran after an
    idle stretch with its old expiry (a throttled CPU's tick stops), not late
    at all: left out. None without worker ticks."""
    ticks = [t for t in ticks if t[2] < tick_ns]
    if not ticks:
        return None
    median_ns = statistics.median_high(ns for *_, ns in ticks)
    late = [(at, cpu, ns) for at, cpu, ns in ticks if ns > TICK_LATE_NS]
    if not late:
        return {"share": 0.0, "late_us": 0.0, "together": 0.0}
    late_at = {(at, cpu) for at, cpu, _ in late}
    cpus = {cpu for _, cpu, _ in ticks}
    together = sum(any((at, c) in late_at for c in cpus - {cpu}) for at, cpu, _ in late)
    return {"share": len(late) / len(ticks), "late_us": (statistics.median_high(ns for *_, ns in late) - median_ns) / 1e3,
            "together": together / len(late)}


def start_late_us(text: str, start_ns: int) -> Optional[float]:
    """How long after the common start a worker thread first ran (the
    workers sleep until it; under TCG that wake-up can be late), or None."""
    for t, _cpu, _comm, _pid, event, f in parse_lines(text):
        if event == "sched_switch" and t >= start_ns and f.get("next_comm") == WORKER_COMM:
            return (t - start_ns) / 1e3
    return None


def kernel_stream(text: str, start_ns: int, end_ns: int, period_ns: Optional[int] = None) -> Stream:
    """The kernel's events of ``[start_ns, end_ns]`` (CLOCK_MONOTONIC) in a
    ``--bw-trace`` text, in ns since ``start_ns``. Where the bandwidth
    functions were probed their events are used; the period and slack timers
    come from ``hrtimer_expire_entry`` (of the timers our processes armed
    outside interrupts), with the periods each expiry covered counted from
    the callback's re-arm (``overruns``, where ``period_ns`` is given), and
    without probes throttling is seen from ``sched_switch``: worker threads
    that left a CPU runnable (prev_state R) and ran again only after an
    expiry of one of those timers (only a timer's distribution unthrottles)
    were throttled there, from the first of them that left (``throttle``)
    until the first that ran again (``unthrottle``). A preemption that lasts
    across an expiry reads as a throttle too."""
    probes = probes_set(text)
    # __assign_cfs_rq_runtime and its caller inlined (Debian's 6.12): the
    # charge that asks for runtime is probed instead, and slack returns (also
    # inlined) are read from runtime_remaining falling between two charges.
    by_account = probes.get("assign") == "__account_cfs_rq_runtime"
    derive_returns = by_account and "return" not in probes
    last_rr: dict[int, tuple[int, int]] = {}  # cfs_rq's CPU -> (when, runtime_remaining) last seen
    open_throttle: dict[int, int] = {}  # line CPU -> runtime_remaining at throttle_cfs_rq's entry
    ours: dict[str, str] = {}  # hrtimer -> its function, for timers our processes armed
    armed: dict[str, int] = {}  # our hrtimer -> the expiry it was last armed for
    last_on_cpu: dict[int, tuple[str, Optional[str]]] = {}  # line CPU -> its previous event (and hrtimer)
    overruns = 0
    events: list[Event] = []
    open_assign: dict[int, dict[str, str]] = {}  # line CPU -> the assign entry's fields
    open_distribute: dict[int, int] = {}  # line CPU -> pool before
    expiries: list[int] = []  # our timers' expiries so far
    stopped: dict[int, tuple[int, int]] = {}  # thread -> when and on which CPU it left runnable
    episodes: set[tuple[int, int]] = set()  # (CPU, the expiry that ended it) of throttles seen
    by_switch = not {"throttle", "unthrottle"} <= set(probes)

    def add(t: int, kind: str, cpu: Optional[int] = None, amount: Optional[int] = None) -> None:
        if start_ns <= t <= end_ns:
            events.append(Event(t - start_ns, kind, cpu, amount))

    def seen_rr(t: int, cpu: int, rr: Optional[int], after: bool) -> None:
        """runtime_remaining on ``cpu`` at ``t``, at a function's entry (or
        ``after`` it): below what it was after the last one, slack went back."""
        if rr is None:
            return
        if derive_returns and not after and cpu in last_rr and rr < last_rr[cpu][1]:
            was_t, was = last_rr[cpu]
            add(was_t, "return", cpu, was - rr)
        last_rr[cpu] = (t, rr)

    def resumed(pid: int, t: int) -> None:
        """Thread ``pid`` runs again at ``t``: throttled if a timer of ours
        expired since it left runnable, with every thread that left its CPU
        before that expiry and after the one before."""
        since, cpu = stopped.pop(pid)
        i = bisect.bisect_right(expiries, since)
        if i == len(expiries) or expiries[i] > t or (cpu, expiries[i]) in episodes:
            return
        episodes.add((cpu, expiries[i]))
        after = expiries[i - 1] if i else -1
        first = min([since] + [w for w, c in stopped.values() if c == cpu and after < w < expiries[i]])
        add(first, "throttle", cpu)
        add(t, "unthrottle", cpu)

    for t, line_cpu, comm, _pid, event, f in parse_lines(text):
        previous = last_on_cpu.get(line_cpu)
        last_on_cpu[line_cpu] = (event, f.get("hrtimer"))
        cpu = _int(f, "cpu")
        cpu = line_cpu if cpu is None else cpu
        if event == "hrtimer_start" and f.get("function") in ("sched_cfs_period_timer", "sched_cfs_slack_timer"):
            # Ours: armed by our controller's cpu.max write or a worker's slack
            # return, in their own context; an interrupt that arms another
            # group's timer while a worker is current is not ours.
            if (comm.startswith(OUR_COMMS) and f["flags"][2:3] == ".") or f["hrtimer"] in ours:
                ours[f["hrtimer"]] = f["function"]
                new, old = _int(f, "expires"), armed.get(f["hrtimer"])
                # The callback's re-arm (__run_hrtimer enqueues it right after
                # its expire_exit, on that CPU) moved the expiry by the periods
                # it counted (hrtimer_forward_now); a restart after the timer
                # went idle counts none.
                if period_ns and new is not None and old is not None and start_ns <= t <= end_ns \
                        and previous == ("hrtimer_expire_exit", f["hrtimer"]):
                    overruns += max(0, (new - old) // period_ns - 1)
                if new is not None:
                    armed[f["hrtimer"]] = new
        elif event == "hrtimer_expire_entry" and f.get("hrtimer") in ours:
            expiries.append(t)
            add(t, "slack_timer" if ours[f["hrtimer"]] == "sched_cfs_slack_timer" else "refill")
        elif event == "refill" and f.get("at", "").startswith("tg_set_cfs_bandwidth"):
            # A cpu.max write's refill. The period timer's is its expiry above:
            # Debian's 6.12 inlines __refill_cfs_bandwidth_runtime there.
            add(t, "refill", None, _int(f, "pool"))
        elif event == "assign":
            open_assign[line_cpu] = f
            seen_rr(t, cpu, _int(f, "rr"), after=False)
        elif event == "assign_ret" and line_cpu in open_assign:
            before = open_assign.pop(line_cpu)
            rr0, rr1 = _int(before, "rr"), _int(f, "rr")
            p0, p1 = _int(before, "pool"), _int(f, "pool")
            seen_rr(t, cpu, rr1, after=True)
            if rr0 is not None and by_account:
                # __account_cfs_rq_runtime asks only when the charge left none and the cfs_rq is not throttled.
                rr0 -= _int(before, "delta") or 0
                if rr0 > 0 or _int(before, "thr"):
                    continue
            amount = rr1 - rr0 if rr0 is not None and rr1 is not None else (p0 - p1 if p0 is not None and p1 is not None else None)
            add(t, "assign", cpu, amount)
        elif event == "return":
            rr = _int(f, "rr")
            if rr is not None and rr > 1_000_000:  # min_cfs_rq_runtime stays
                add(t, "return", cpu, rr - 1_000_000)
        elif event == "throttle_entry":
            rr = _int(f, "rr")
            seen_rr(t, cpu, rr, after=False)
            if rr is not None:
                open_throttle[line_cpu] = rr
        elif event == "throttle":
            rr0, rr1 = open_throttle.pop(line_cpu, None), _int(f, "rr")
            seen_rr(t, cpu, rr1, after=True)
            if by_account and rr0 is not None and rr1 is not None:
                add(t, "assign", cpu, rr1 - rr0)  # its ask for 1 ns, inlined
            if _int(f, "ok") and not by_switch:
                add(t, "throttle", cpu)
        elif event == "unthrottle":
            seen_rr(t, cpu, _int(f, "rr"), after=True)
            if not by_switch:
                add(t, "unthrottle", cpu)
        elif event == "distribute":
            pool = _int(f, "pool")
            if pool is not None:
                open_distribute[line_cpu] = pool
        elif event == "distribute_ret" and line_cpu in open_distribute:
            given = open_distribute.pop(line_cpu) - (_int(f, "pool") or 0)
            if given > 0:
                add(t, "distribute", None, given)
        elif event == "sched_switch" and by_switch:
            prev, nxt = int(f.get("prev_pid", -1)), int(f.get("next_pid", -1))
            if f.get("prev_comm") == WORKER_COMM and f.get("prev_state", "").startswith("R"):
                stopped[prev] = (t, line_cpu)
            if f.get("next_comm") == WORKER_COMM and nxt in stopped:
                resumed(nxt, t)
    kinds = ["refill", "slack_timer", "throttle", "unthrottle"]
    seen = set(probes) | ({"return"} if derive_returns else set())
    kinds += [k for k in ("assign", "return", "distribute") if k in seen and (k != "distribute" or "distribute_ret" in probes)]
    notes = [line[2:] for line in text.splitlines() if line.startswith(("# no probe", "# symbols"))]
    if by_account:
        notes.append("grants from __account_cfs_rq_runtime and throttle_cfs_rq (__assign_cfs_rq_runtime is inlined)")
    if derive_returns:
        notes.append("slack returns from runtime_remaining falling between two charges (__return_cfs_rq_runtime is inlined)")
    if by_switch:
        notes.append("throttle and unthrottle seen from sched_switch: worker threads off their CPU while runnable across an expiry "
                     "of the group's timers (a preemption across one reads as a throttle too)")
    return Stream(sorted(events, key=lambda e: e.t_ns), tuple(k for k in KINDS if k in kinds), notes, overruns)


# --- the simulator's side: its trace's records ---------------------------------------

def sim_stream(records: Iterable[dict[str, Any]], tg: int) -> Stream:
    """The simulator's events of group ``tg`` (its trace's records, whose
    ``t_ns`` is since the run's start). A distribution's per-cfs_rq grants at
    one instant are one ``distribute`` of their sum, as the kernel's probe sees
    one call; ``slack_distribute`` is the slack timer's call of it."""
    events: list[Event] = []
    for r in records:
        if r["tg"] != tg:
            continue
        kind, t, cpu, arg = r["kind"], r["t_ns"], r.get("cpu"), r.get("arg")
        if kind in ("assign", "return"):
            events.append(Event(t, kind, cpu, arg))
        elif kind == "refill":
            events.append(Event(t, "refill", None, r["global_ns"]))
        elif kind in ("throttle", "unthrottle"):
            events.append(Event(t, kind, cpu))
        elif kind == "slack_timer":
            events.append(Event(t, "slack_timer"))
        elif kind == "distribute":
            last = events[-1] if events else None
            if last is not None and last.kind == "distribute" and last.t_ns == t:
                events[-1] = Event(t, "distribute", None, (last.amount_ns or 0) + arg)
            else:
                events.append(Event(t, "distribute", None, arg))
    return Stream(sorted(events, key=lambda e: e.t_ns), KINDS)


# --- alignment --------------------------------------------------------------------

@dataclass
class Periods:
    """A stream cut at its refills: period 0 is before the first, period i
    starts at the i-th."""

    starts: list[int]
    events: list[list[Event]]

    @classmethod
    def of(cls, stream: Stream) -> "Periods":
        starts = [e.t_ns for e in stream.events if e.kind == "refill"]
        events: list[list[Event]] = [[] for _ in range(len(starts) + 1)]
        for e in stream.events:
            events[bisect.bisect_right(starts, e.t_ns)].append(e)
        return cls(starts, events)

    def start(self, i: int) -> int:
        return 0 if i == 0 else self.starts[i - 1]

    def get(self, i: int) -> list[Event]:
        return self.events[i] if i < len(self.events) else []

    def length(self, i: int) -> Optional[int]:
        """Period i's length (None: the last, open)."""
        return self.starts[i] - self.start(i) if i < len(self.starts) else None


@dataclass
class Divergence:
    """Where two streams first differ: the period, the kind and CPU, why, and
    both sides' events of that period and the one before, with each side's
    period start (ns since the run's start)."""

    period: int
    kind: str
    cpu: Optional[int]
    why: str
    kernel_start_ns: int
    sim_start_ns: int
    kernel: list[Event]
    sim: list[Event]


def _mismatch(kind: str, k: list[Event], s: list[Event], k0: int, s0: int, tol_ns: int) -> Optional[tuple[int, str]]:
    """The first difference of one kind on one CPU in one period, as (its
    time from the period's start, why), or None."""
    for a, b in zip(k, s):
        dt = (a.t_ns - k0) - (b.t_ns - s0)
        if abs(dt) > tol_ns:
            return (min(a.t_ns - k0, b.t_ns - s0),
                    f"{kind} at +{(a.t_ns - k0) / 1e6:.3f} ms in the kernel, +{(b.t_ns - s0) / 1e6:.3f} ms in the simulator")
        if kind in AMOUNTS and a.amount_ns is not None and b.amount_ns is not None and abs(a.amount_ns - b.amount_ns) > tol_ns:
            return (min(a.t_ns - k0, b.t_ns - s0),
                    f"{kind} of {a.amount_ns / 1e3:,.1f} us in the kernel, {b.amount_ns / 1e3:,.1f} us in the simulator")
    if len(k) != len(s):
        extra = (k if len(k) > len(s) else s)[min(len(k), len(s))]
        at = extra.t_ns - (k0 if len(k) > len(s) else s0)
        return at, f"{len(k)} {kind} in the kernel, {len(s)} in the simulator"
    return None


def compare_period(kinds: Sequence[str], k: list[Event], s: list[Event], k0: int, s0: int,
                   tol_ns: int) -> Optional[tuple[int, str, Optional[int], str]]:
    """The earliest difference in one period: (time from its start, kind, cpu, why), or None."""
    found = []
    for kind in kinds:
        cpus = sorted({e.cpu for e in k + s if e.kind == kind}, key=lambda c: -1 if c is None else c)
        for cpu in cpus:
            m = _mismatch(kind, [e for e in k if e.kind == kind and e.cpu == cpu],
                          [e for e in s if e.kind == kind and e.cpu == cpu], k0, s0, tol_ns)
            if m is not None:
                found.append((m[0], kind, cpu, m[1]))
    return min(found, key=lambda f: f[0]) if found else None


def align(kp: Periods, sp: Periods, period_ns: int) -> list[tuple[Optional[int], Optional[int]]]:
    """Pairs of (kernel period, simulator period): both periods 0, then
    periods whose refills lie within half a period of each other, in order;
    a refill with no counterpart (a timer that expired late past a whole
    period, whose refill then counted two) pairs with None."""
    pairs: list[tuple[Optional[int], Optional[int]]] = [(0, 0)]
    i = j = 1
    while i <= len(kp.starts) or j <= len(sp.starts):
        k = kp.starts[i - 1] if i <= len(kp.starts) else None
        s = sp.starts[j - 1] if j <= len(sp.starts) else None
        if k is not None and s is not None and 2 * abs(k - s) <= period_ns:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif s is None or (k is not None and k < s):
            pairs.append((i, None))
            i += 1
        else:
            pairs.append((None, j))
            j += 1
    return pairs


def first_divergence(kernel: Stream, sim: Stream, period_ns: int, tolerance_us: float = TOLERANCE_US,
                     until_ns: Optional[int] = None) -> tuple[Optional[Divergence], dict[str, list[int]]]:
    """The first divergence of two streams (None: none within the
    tolerance), and per kind compared [periods alike, periods compared] over
    the periods both sides have (:func:`align`) that start by ``until_ns``
    (the run's end: the kernel's timer runs on after its workers stop)."""
    kinds = [k for k in KINDS if k in kernel.kinds and k in sim.kinds]
    tol_ns = round(tolerance_us * 1e3)
    kp, sp = Periods.of(kernel), Periods.of(sim)
    pairs = align(kp, sp, period_ns)
    alike = {kind: [0, 0] for kind in kinds}
    first = None
    for n, (i, j) in enumerate(pairs):
        k, s = kp.get(i) if i is not None else [], sp.get(j) if j is not None else []
        k0 = kp.start(i) if i is not None else sp.start(j)  # type: ignore[arg-type]
        s0 = sp.start(j) if j is not None else k0
        if until_ns is not None and min(k0, s0) > until_ns:
            break
        if i is not None and j is not None:
            # Compared over the shorter: the rest of the longer is a period the other lacks.
            lengths = [n for n in (kp.length(i), sp.length(j)) if n is not None]
            if lengths:
                k = [e for e in k if e.t_ns - k0 < min(lengths)]
                s = [e for e in s if e.t_ns - s0 < min(lengths)]
        if i is not None and j is not None:
            for kind in kinds:
                alike[kind][1] += 1
                if compare_period([kind], k, s, k0, s0, tol_ns) is None:
                    alike[kind][0] += 1
        if first is not None:
            continue
        if i is None or j is None:
            side, other = ("kernel", "simulator") if j is None else ("simulator", "kernel")
            d: Optional[tuple[int, str, Optional[int], str]] = (
                0, "refill", None, f"a refill only the {side} has, at {(k0 if j is None else s0) / 1e6:.3f} ms (none in the {other} within half a period)")
        else:
            d = compare_period(kinds, k, s, k0, s0, tol_ns)
            if d is None and n > 0 and abs(k0 - s0) > tol_ns:
                d = (0, "refill", None, f"the period starts {(k0 - s0) / 1e6:+.3f} ms apart (kernel - simulator)")
        if d is not None:
            pi, pj = pairs[n - 1] if n else (None, None)
            before_k = kp.get(pi) if pi is not None else []
            before_s = sp.get(pj) if pj is not None else []
            first = Divergence(n, d[1], d[2], d[3], k0, s0, before_k + k, before_s + s)
    return first, alike


# --- running both sides ------------------------------------------------------------

#: Runs the scenario (text) on a kernel once per overrides list, each after
#: ``settle_s``, with ``--bw-trace``; yields (output document JSON, trace text).
TracedRun = Callable[[str, Sequence[Sequence[str]], float], Sequence[tuple[str, str]]]


def host_traced_runs(text: str, runs: Sequence[Sequence[str]], settle_s: float) -> list[tuple[str, str]]:
    """The host's runs, each by the controller with ``--bw-trace`` in a
    mount namespace of its own (tracefs mounted for the run stays its own, so
    other users of the host's tracefs are not disturbed)."""
    _native.real_preflight(text, list(runs[0]))
    if shutil.which("unshare") is None:
        raise DiffError("unshare (util-linux) not found: diff runs the controller in a mount namespace of its own")
    done = []
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "scenario.toml"
        scenario.write_text(text, encoding="utf-8")
        for i, overrides in enumerate(runs):
            time.sleep(settle_s)
            trace = Path(tmp) / f"bw-{i + 1}.txt"
            cmd = ["unshare", "-m", "--propagation", "private", str(CONTROLLER), str(scenario), "--bw-trace", str(trace)]
            for o in overrides:
                cmd += ["--set", o]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                said = [line for line in proc.stderr.splitlines() if "error:" in line] or proc.stderr.strip().splitlines()[-1:]
                raise _native.HarnessError(said[-1].split("error: ", 1)[-1] if said else f"the controller exited {proc.returncode}")
            done.append((proc.stdout.strip().splitlines()[-1], trace.read_text(encoding="utf-8", errors="replace")))
    return done


def vm_traced_runs(k: vm.Kernel, accel: str = "auto", note: Callable[[str], None] = lambda _: None) -> TracedRun:
    """Runs in a guest booting ``k`` (all of a call's runs in one boot, cgroup v2), each traced."""

    def run_on_k(text: str, runs: Sequence[Sequence[str]], settle_s: float) -> list[tuple[str, str]]:
        traces: list[str] = []
        resolved = json.loads(_native.validate(text, list(runs[0])))
        outs = vm.run(k, text, runs, resolved, accel, "v2", note, settle_s, bw_traces=traces)
        return list(zip(outs, traces))

    return run_on_k


def limited_group(resolved: dict[str, Any]) -> tuple[int, str]:
    """The one limited cgroup (tg index, name) ``diff`` traces."""
    limited = [(i + 1, c["name"]) for i, c in enumerate(resolved["cgroups"]) if c["quota_us"] is not None]
    if len(limited) != 1:
        raise DiffError(f"diff traces one limited cgroup; the scenario has {len(limited)} (cgroup.NAME.quota_us)")
    return limited[0]


def start_overrides(resolved: dict[str, Any], late_us: Optional[float]) -> list[str]:
    """The paired simulator's threads start as late as the kernel's first
    worker ran after the common start (a guest under TCG: 0.4-1 ms idle, 15
    ms on a busy host): every task's ``start_us`` moved by that lateness
    beyond the earliest one the scenario asks for. None or no lateness: no
    overrides."""
    tasks = resolved["tasks"]
    if late_us is None or not tasks:
        return []
    shift = round(late_us - min(t["start_us"] for t in tasks))
    return [f"task.{t['name']}.start_us={t['start_us'] + shift}" for t in tasks] if shift > 0 else []


def paired_sim(text: str, overrides: Sequence[str], host: dict[str, Any], tg: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The simulator paired to one kernel run: its output and its trace's records."""
    run = _native.trace(text, list(overrides), like_host=json.dumps(host), placed=True)
    records: list[dict[str, Any]] = []
    for _now, chunk in run:
        records += json.loads(chunk)["records"]
    return json.loads(run.output()), records


def pair_run(text: str, resolved: dict[str, Any], kout: dict[str, Any], trace: str, run_overrides: Sequence[str],
             tolerance_us: float = TOLERANCE_US, late_ticks: bool = True) -> dict[str, Any]:
    """One kernel run (its output ``kout`` and its ``trace``) against the
    simulator run paired to it: ``diff``'s result for the run (without its
    number). A stored run (``-o``'s trace and diff.json's host) pairs again
    with it."""
    tg, name = limited_group(resolved)
    period_ns = resolved["cgroups"][tg - 1]["period_us"] * 1_000
    host = dict(kout["host"])
    host.pop("vm", None)
    notes = []
    if host.get("tick_latency_us") is None:
        # The guest does not probe it (docs/vm.md): its own trace's ticks say
        # it. The simulator draws lateness in [0, 2 x median), within a tick.
        hz = host.get("hz") or resolved["machine"]["hz"]
        ticks = worker_ticks(trace)
        late = tick_latency_us(ticks)
        if late is not None and 2 * late * hz < 1e6:
            host["tick_latency_us"] = late
        else:
            notes.append(f"the tick's lateness not modelled: {'not traced' if late is None else f'{late:.0f} us at the median'}")
        if late_ticks and host.get("tick_late") is None:
            # Nor its late ticks: the run's own (the simulator's machine.tick_late_*).
            host["tick_late"] = tick_late(ticks, round(1e9 / hz))
    start_ns = round(host["uptime_s"] * 1e9)
    # The run's window, as its cpu.stat's (read at the planned end).
    end_ns = round(kout["duration_s"] * 1e9)
    kernel = kernel_stream(trace, start_ns, start_ns + end_ns, period_ns)
    late_us = start_late_us(trace, start_ns)
    sout, records = paired_sim(text, [*run_overrides, *start_overrides(resolved, late_us)], host, tg)
    sim = sim_stream(records, tg)
    first, alike = first_divergence(kernel, sim, period_ns, tolerance_us, until_ns=end_ns)
    return {
        "host": kout["host"],
        "tick_latency_us": host.get("tick_latency_us"),
        "tick_late": host.get("tick_late"),
        "start_late_us": late_us,
        "kernel": kout["cgroups"][name],
        "sim": sout["cgroups"][name],
        "kinds": [k for k in KINDS if k in kernel.kinds],
        "notes": kernel.notes + notes,
        "periods": {"kernel": len(Periods.of(kernel).starts), "sim": len(Periods.of(sim).starts)},
        "kernel_overruns": kernel.overruns,
        "throttles": {"kernel": sum(e.kind == "throttle" and e.t_ns <= end_ns for e in kernel.events),
                      "sim": sum(e.kind == "throttle" for e in sim.events)},
        "first_divergence": None if first is None else {**asdict(first), "kernel": [asdict(e) for e in first.kernel], "sim": [asdict(e) for e in first.sim]},
        "alike": alike,
        "streams": (kernel, sim),
        "trace": trace,
    }


def diff(text: str, overrides: Sequence[str] = (), runs: int = 1, on: Optional[TracedRun] = None,
         tolerance_us: float = TOLERANCE_US, settle_s: float = SETTLE_S,
         step: Optional[Callable[[str], None]] = None, late_ticks: bool = True) -> dict[str, Any]:
    """Run ``text`` ``runs`` times on the host (or ``on`` another kernel) with
    the kernel's bandwidth events traced, pair a simulator run to each, and
    align them. The result holds, per run, both outputs' cpu.stat, the
    sources' notes, the first divergence and per kind the periods alike; with
    ``"streams"`` and the kernel's ``"trace"`` text (not serialised by the
    CLI) for the Perfetto export."""
    resolved = json.loads(_native.validate(text, list(overrides)))
    _tg, name = limited_group(resolved)
    step = step or (lambda _label: None)
    all_runs = [[*overrides, f"seed={i + 1}"] for i in range(runs)]
    traced = (on or host_traced_runs)(text, all_runs, settle_s)
    results = []
    for i, ((out_json, trace), run_overrides) in enumerate(zip(traced, all_runs)):
        step(f"kernel run {i + 1}")
        results.append({"run": i + 1, **pair_run(text, resolved, json.loads(out_json), trace, run_overrides, tolerance_us, late_ticks)})
        step("simulator")
    return {"scenario": resolved["name"], "cgroup": name, "tolerance_us": tolerance_us, "runs": results}


# --- output ------------------------------------------------------------------------

def render(result: dict[str, Any]) -> list[RenderableType]:
    """Per run: both sides' cpu.stat, the first divergence with both sides'
    events around it, and per kind the periods alike."""
    from rich.markup import escape

    parts: list[RenderableType] = [
        f"[bold]{escape(result['scenario'])}[/bold]  cgroup {escape(result['cgroup'])}  tolerance {result['tolerance_us']:g} us"
    ]
    for run in result["runs"]:
        host = run["host"]
        vm = host.get("vm")
        where = f"{vm['kernel']} ({vm['accel'].upper()})" if vm else f"host {host['release']}"
        late = run["tick_latency_us"]
        parts.append(
            f"[bold]run {run['run']}[/bold]: {escape(where)}; simulator paired (started and its period timer where the kernel's were"
            + (f", ticks {late:.0f} us late" if late is not None else "") + f"); compared: {', '.join(run['kinds'])}"
        )
        if run["start_late_us"] is not None:
            parts.append(f"  the kernel's first worker thread ran {run['start_late_us']:,.0f} us after the common start (the simulator's threads start as late)")
        if run["kernel_overruns"]:
            parts.append(f"  the kernel's period timer expired late past a whole period: {run['kernel_overruns']} periods without a refill of their own")
        for note in run["notes"]:
            parts.append(f"  note: {escape(note)}")
        k, s = run["kernel"], run["sim"]
        parts.append(f"  throttled periods: kernel {k['nr_throttled']}/{k['nr_periods']} ({k['throttled_usec'] / 1e3:.1f} ms), "
                     f"simulator {s['nr_throttled']}/{s['nr_periods']} ({s['throttled_usec'] / 1e3:.1f} ms); "
                     f"throttles traced: kernel {run['throttles']['kernel']}, simulator {run['throttles']['sim']}; "
                     f"usage: kernel {k['usage_usec'] / 1e6:.3f} s, simulator {s['usage_usec'] / 1e6:.3f} s")
        d = run["first_divergence"]
        if d is None:
            parts.append("  no divergence within the tolerance")
        else:
            cpu = "" if d["cpu"] is None else f" on CPU {d['cpu']}"
            parts.append(f"  [red]first divergence[/red]: period {d['period']} ({d['kind']}{cpu}): {escape(d['why'])}")
            t = table("the period before and the period (ms from each side's period start; dim: not compared)",
                      ("kernel", "simulator"), left=("kernel", "simulator"))
            for a, b in _side_by_side(d, run["kinds"]):
                t.add_row(a, b)
            parts.append(t)
        t = table("periods alike, by kind", ("kind", "alike", "compared"), left=("kind",))
        for kind, (same, total) in run["alike"].items():
            t.add_row(kind, str(same), str(total))
        parts.append(t)
    return parts


def _side_by_side(d: dict[str, Any], kinds: Sequence[str]) -> list[tuple[str, str]]:
    from rich.markup import escape

    def lines(events: list[dict[str, Any]], start: int) -> list[str]:
        # Times from the divergent period's start: the period before shows
        # negative. Kinds not compared (the kernel's source cannot see them) dimmed.
        return [escape(Event(**e).text(start)) if e["kind"] in kinds else f"[dim]{escape(Event(**e).text(start))}[/dim]"
                for e in events]

    a, b = lines(d["kernel"], d["kernel_start_ns"]), lines(d["sim"], d["sim_start_ns"])
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else "", b[i] if i < len(b) else "") for i in range(n)]


def perfetto_events(kernel: Stream, sim: Stream, cpus: int) -> list[dict[str, Any]]:
    """Chrome/Perfetto trace events: process 1 the kernel, process 2 the
    simulator, each with a track per CPU (throttled spans as slices, grants,
    returns as instants) and a track of the group's pool and timers."""
    events: list[dict[str, Any]] = []
    for pid, name, stream in ((1, "kernel", kernel), (2, "simulator", sim)):
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
        tracks = [(cpu, f"CPU {cpu}") for cpu in range(cpus)] + [(cpus, "pool and timers")]
        for tid, label in tracks:
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": label}})
        throttled: dict[int, int] = {}
        for e in stream.events:
            tid = cpus if e.cpu is None else e.cpu
            if e.kind == "throttle" and e.cpu is not None:
                throttled.setdefault(e.cpu, e.t_ns)
            elif e.kind == "unthrottle" and e.cpu in throttled:
                since = throttled.pop(e.cpu)
                events.append({"ph": "X", "name": "throttled", "pid": pid, "tid": tid, "ts": since / 1e3, "dur": (e.t_ns - since) / 1e3})
            args = {} if e.amount_ns is None else {"us": e.amount_ns / 1e3}
            events.append({"ph": "i", "s": "t", "name": e.kind, "pid": pid, "tid": tid, "ts": e.t_ns / 1e3, "args": args})
    return events


def write_perfetto(out_dir: Path, result: dict[str, Any], cpus: int) -> list[Path]:
    """One Perfetto JSON trace per run in ``out_dir`` (``run-N.json``), the
    kernel's trace text as tracefs gave it (``run-N.bw.txt``), and the result
    without the streams (``diff.json``); returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for run in result["runs"]:
        path = out_dir / f"run-{run['run']}.json"
        with open(path, "w", encoding="utf-8") as f:
            write_json(f, [perfetto_events(*run["streams"], cpus)])
        text = out_dir / f"run-{run['run']}.bw.txt"
        text.write_text(run["trace"], encoding="utf-8")
        paths += [path, text]
    path = out_dir / "diff.json"
    path.write_text(json.dumps(serialisable(result)) + "\n", encoding="utf-8")
    return [*paths, path]


def serialisable(result: dict[str, Any]) -> dict[str, Any]:
    """The result without the streams and the kernel's trace text."""
    return {**result, "runs": [{k: v for k, v in run.items() if k not in ("streams", "trace")} for run in result["runs"]]}
