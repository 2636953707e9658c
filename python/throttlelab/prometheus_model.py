"""Demand models fitted to a container's own cAdvisor counters, and the
smallest limit they all say meets a throttling target (docs/prometheus.md).

A model: the container's CPU time arrives as bursts of mean length
``burst_us`` (spread by ``cost_cv``, lognormal) at Poisson times, each burst
run by one of ``threads`` threads (a burst that finds them all busy waits), at
the window's usage (core-seconds per second). cAdvisor's counters cannot say
how long a burst is, so every length of BURSTS_US at every spread of COST_CVS
is a model; where ``container_threads`` is 0 (no pids controller) every count
of THREADS_UNKNOWN is too.

Fit: the windows are put in USAGE_BANDS by their usage (the busiest 10 %,
the next 15 %, the next 25 %, the rest); each band's mean usage (and, for a
band near the limit, DEMAND_FACTORS times it, SECONDS_FACTORS where throttled
seconds are fitted: demand the limit held back) is
simulated for SIM_S at the container's own limit, and a model is consistent
when in every band some demand reproduces the band's usage within
USAGE_TOLERANCE, its throttled ratio
(container_cpu_cfs_throttled_periods_total / _periods_total) within
:func:`ratio_bound` and, where the node's CPU count is known
(machine_cpu_cores), its throttled seconds per throttled period
(container_cpu_cfs_throttled_seconds_total) within :func:`seconds_bound`.
It is kept with the least and the most such demand, unless it is biased low
over the bands (BIAS_Z). The search (advise's bisection, advise.bisect) then asks
every consistent model at each candidate quota: a candidate meets the target
when the worst of them, each weighting its bands by their periods, is at most
``max_throttled``. The recommendation is advise's HEADROOM over the boundary,
and its range is the spread of the consistent models' predictions there.

Where no such model is consistent, the aligned family (:func:`aligned_models`,
:meth:`Fit.widen`) is fitted next: threads that wake together on a timer, K
wake-ups then a rest, held to the band's share of periods with work as well.
Its threads compute a burst of work (a batch that ticks: what throttling
holds back is owed). Where neither it nor the closed loop fits, its timed kind
is fitted last (``Model.timed``): busy for a wall time, as rt-app's `runtime`
on its `timer`, a timer of each thread's own that counts from a late wake-up
(what throttling holds back is lost). A timed model held at its limit fits
any demand above it, so it comes last: a container the others explain is not
refused for it.
The closed-loop family (:func:`closed_models`) is fitted with it: threads that
each run a burst, then sleep, the sleep starting when the burst ends (a worker
that computes, then waits; stress-ng's --cpu-load): its demand waits while it
is throttled, so it does not pile up as Poisson arrivals do, and its
throttled seconds say how many of its threads were held back.
Each band is simulated with the node's other load beside the container (its
root container's usage less the container's, where scraped): NODE_BURST_US
bursts at Poisson times on every CPU of the node, in a cgroup of its own
without a limit. It takes CPUs from the container's threads, which moves
their throttled seconds (rt-app's timer threads' by half on 2 CPUs).
A fit where some model reproduces every band at the most demand tried
(:attr:`Fit.unbounded`) says nothing of the demand above the limit: advise
refuses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from throttlelab._native import scenario_toml
from throttlelab.advise import Outcome, Setting, _with_headroom, bisect
from throttlelab.prometheus import Container, Window
from throttlelab.runner import Run

#: Burst lengths tried (us): from a request's few ms to a batch step's 200 ms.
BURSTS_US = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000)
#: Spreads of the independent family's burst lengths (coefficients of
#: variation; the service's `cost_cv`, lognormal): a real service's requests do
#: not all cost the same. What the counters see of a burst's length is the
#: spread of each period's demand, usage x E[B^2]/E[B] = usage x B(1 + cv^2):
#: B at cv 0, 1.56 B at 0.75, so the lengths stood for are at most 1.6x apart
#: where BURSTS_US's are 2-2.5x. pgbench's requests (captured: mean 6.9 ms, cv
#: 0.27, so 7.4 ms of it) fell between 5 and 10 ms: 5 ms alone reproduced its
#: counters, low in every band (docs/prometheus.md, "Run-2's pgbench").
COST_CVS = (0.0, 0.75)
#: Thread counts tried where container_threads is 0 (a cgroup without pids).
THREADS_UNKNOWN = (1, 2, 4)
#: The aligned family (where no independent model reproduces the counters):
#: every thread wakes on a timer of TIMERS_US, all together, and runs that
#: times DUTIES each wake-up; after K wake-ups (K from the demand) all rest
#: RESTS_US. From a 10 ms control loop to a 100 ms tick, resting a quarter
#: second to two seconds between busy phases.
TIMERS_US = (10_000, 25_000, 50_000, 100_000)
DUTIES = (0.25, 0.5, 0.75)
RESTS_US = (250_000, 500_000, 1_000_000, 2_000_000)
#: At most this many wake-ups in a busy phase (more: no rest at all).
MAX_WAKES = 200
#: Windows put together by usage: the busiest 10 %, then 15 %, 25 %, 50 %.
USAGE_BANDS = (0.10, 0.15, 0.25, 0.50)
#: Simulated seconds per band (at 100 ms periods, 200 periods).
SIM_S = 20
#: A fit's usage may differ from the band's by this fraction (and 0.01 CPUs).
USAGE_TOLERANCE = 0.10
#: Each band alone is judged within a bound (:func:`ratio_bound`), and a model
#: just inside it on the hopeful side in every band passed, then advised too
#: little (pgbench's 5 ms, nginx's 3 ms; docs/prometheus.md). So the bands are
#: judged together too: a model is **biased low** where its throttled ratios'
#: deviations from the bands', each in standard errors (both sides, binomial),
#: summed over the bands and divided by the root of their number (Stouffer's
#: z), are below -BIAS_Z: an unbiased model is, by chance, 2.3 % of the time.
#: High is kept: the search takes the worst model, which errs towards a
#: larger limit. Only with BIAS_BANDS bands or more (on fewer, it is the
#: per-band bound again, without its 0.05), and only for independent bursts,
#: whose periods are near independent draws: the aligned and closed families'
#: throttled periods come in busy phases and rests, so a binomial standard
#: error understates their spread (the aligned test's own scenario, 4 threads
#: busy 0.5 s of every 2.5 s, came out at -2.06).
BIAS_Z = 2.0
BIAS_BANDS = 3
#: Fewer windows than this cannot be told apart from one noisy one.
MIN_WINDOWS = 3
#: "Near the limit": a window using this fraction of the quota or more.
NEAR_LIMIT = 0.5
#: A band near the limit may have had more demand than the limit let through:
#: these multiples of its usage are tried too.
DEMAND_FACTORS = (1.0, 1.25, 1.5, 2.0)
#: Where throttled seconds are fitted, these too: a model that fits at 2x may
#: not at 3x (a closed loop's throttled seconds grow with its demand), and
#: only a fit at the top multiple says the counters cannot bound the demand.
SECONDS_FACTORS = DEMAND_FACTORS + (2.5, 3.0)
#: The CPUs a node is assumed to have at least where its machine_cpu_cores is
#: not scraped (the quota and the threads raise it); throttled seconds are then
#: not fitted, since they grow with the CPUs.
NODE_CPUS = 8
#: The node's other load is simulated as bursts of this length (us): the
#: counters do not say how long its bursts are; on rt-app's shape, 2, 5 and
#: 20 ms bursts gave the same throttled seconds (docs/prometheus.md).
NODE_BURST_US = 5_000
#: Below this many CPUs of other load, the node is simulated idle.
MIN_OTHER_CPUS = 0.01
#: cpu.stat's throttled_usec counts whole microseconds (the simulator's too):
#: each reading of throttled seconds is off by less than this.
THROTTLED_RESOLUTION_S = 1e-6

#: The scenario's machine and cgroup: every model is simulated in these.
_WINDOW = {
    "name": "prometheus-window",
    "duration_s": 20,
    "seed": 1,
    "machine": {"cpus": 8, "hz": 250},
    "cgroup": [{"name": "container", "period_us": 100000, "quota_us": 100000}],
}
_COMMENT = "One container's demand model for one band of its windows (throttlelab.prometheus_model)."
_SERVICE = {
    **_WINDOW,
    "service": [{"name": "bursts", "cgroup": "container", "workers": 1, "arrival": "poisson", "rate_per_s": 1, "cost_us": 10000}],
}
SCENARIO = scenario_toml(_COMMENT, _SERVICE)


@dataclass(frozen=True)
class Band:
    """Windows of similar usage: their mean usage and throttling, and weight."""

    usage_cpus: float
    throttled_ratio: float
    periods: float
    windows: int
    #: Its windows' seconds: periods / (seconds / period) is the share of periods
    #: the container had work in (the period timer stops while it sleeps).
    seconds: float = 0.0
    #: container_cpu_cfs_throttled_seconds_total's and _periods_total's increase.
    throttled_s: float = 0.0
    throttled_periods: float = 0.0
    #: The node's other load over its windows (CPUs; 0: not scraped).
    other_cpus: float = 0.0


@dataclass(frozen=True)
class Model:
    """Independent bursts (``timer_us`` 0): bursts of ``burst_us`` at Poisson
    times on ``threads`` threads. Aligned (``timer_us`` > 0): ``threads``
    threads that all wake every ``timer_us`` (on the same multiples of it) and
    each run ``burst_us``, K times, then all rest ``rest_us``; K is what gives
    the demand (:func:`wakes`). Closed loop (``closed``): ``threads`` threads
    that each run ``burst_us``, then sleep what gives the demand
    (:func:`sleep_us`), again and again."""

    burst_us: int
    threads: int
    timer_us: int = 0
    rest_us: int = 0
    closed: bool = False
    #: Aligned, as rt-app's events: busy for ``burst_us`` of wall time (its
    #: `runtime`: a throttled thread loses that time, it does not owe it) on
    #: a timer of its own (its `timer`, relative mode: a late wake-up does not
    #: sleep, and the next is a period after it).
    timed: bool = False
    #: Independent bursts: their lengths' coefficient of variation (lognormal
    #: with mean ``burst_us``; 0: all ``burst_us``).
    cost_cv: float = 0.0

    @property
    def aligned(self) -> bool:
        return self.timer_us > 0

    @property
    def family(self) -> str:
        return "aligned" if self.aligned else "closed" if self.closed else "independent"

    def __str__(self) -> str:
        if self.closed:
            return f"{self.threads} thread(s) each running {self.burst_us / 1000:g} ms, then sleeping"
        if not self.aligned:
            spread = f" (cv {self.cost_cv:g})" if self.cost_cv else ""
            return f"bursts of {self.burst_us / 1000:g} ms{spread} on {self.threads} thread(s)"
        busy = "busy " if self.timed else ""
        return (
            f"{self.threads} thread(s) waking together every {self.timer_us / 1000:g} ms {busy}for {self.burst_us / 1000:g} ms,"
            f" resting {self.rest_us / 1e6:g} s between busy phases"
        )


def aligned_models(threads: Sequence[int], timed: bool = False) -> list[Model]:
    """The aligned family: every timer, duty and rest, on each thread count;
    computing work, or (``timed``) busy for a wall time."""
    return [Model(round(d * t), n, t, r, timed=timed) for n in threads for t in TIMERS_US for d in DUTIES for r in RESTS_US]


def independent_models(threads: Sequence[int]) -> list[Model]:
    """The independent family: every burst length at every spread, on each thread count."""
    return [Model(b, n, cost_cv=cv) for n in threads for b in BURSTS_US for cv in COST_CVS]


def closed_models(threads: Sequence[int]) -> list[Model]:
    """The closed-loop family: every burst length, on each thread count."""
    return [Model(b, n, closed=True) for n in threads for b in BURSTS_US]


def sleep_us(model: Model, demand_cpus: float) -> int:
    """The sleep after each burst that gives a closed-loop model ``demand_cpus``
    unthrottled (each thread: burst_us of CPU in burst_us + sleep); 0 where
    its threads cannot give that much (then they never sleep)."""
    per_thread = demand_cpus / model.threads
    return 0 if per_thread >= 1 else round(model.burst_us * (1 / per_thread - 1))


def wakes(model: Model, demand_cpus: float) -> Optional[int]:
    """The wake-ups per busy phase that give an aligned model ``demand_cpus``
    unthrottled (each thread: K x burst_us of CPU in K x timer_us + rest_us),
    or None where even no rest at all gives less (then it never rests)."""
    on_cpus = model.threads * model.burst_us / model.timer_us
    if demand_cpus >= on_cpus:
        return None
    k = demand_cpus * model.rest_us / (model.timer_us * (on_cpus - demand_cpus))
    return None if k > MAX_WAKES else max(1, round(k))


def bands(windows: Sequence[Window]) -> list[Band]:
    """``windows`` in USAGE_BANDS by usage, busiest first; empty bands left out."""
    ordered = sorted(windows, key=lambda w: -w.usage_cpus)
    out, start = [], 0
    for i, share in enumerate(USAGE_BANDS):
        end = len(ordered) if i == len(USAGE_BANDS) - 1 else min(len(ordered), start + max(1, round(share * len(ordered))))
        group = ordered[start:end]
        start = end
        if not group:
            continue
        periods = sum(w.periods for w in group)
        seconds = sum(w.end_s - w.start_s for w in group)
        usage = sum(w.usage_s for w in group) / seconds
        throttled = sum(w.throttled_periods for w in group)
        ratio = throttled / periods if periods else 0.0
        other = sum(w.other_cpus * (w.end_s - w.start_s) for w in group) / seconds
        if usage > 0:
            out.append(Band(usage, ratio, periods, len(group), seconds, sum(w.throttled_s for w in group), throttled, other))
    return out


def two_standard_errors(observed: float, observed_periods: float, simulated_periods: float) -> float:
    """Two standard errors of each side's mean of a per-period share in [0, 1]
    (variance at most p(1 - p), a binomial proportion's), p kept off 0 and 1."""
    p = min(max(observed, 0.02), 0.98)
    return 2 * math.sqrt(p * (1 - p) / max(observed_periods, 1)) + 2 * math.sqrt(p * (1 - p) / max(simulated_periods, 1))


def ratio_bound(observed: float, observed_periods: float, simulated_periods: float) -> float:
    """How far a simulated throttled ratio may be from the observed one: 0.05,
    plus two standard errors of each as a binomial proportion."""
    return 0.05 + two_standard_errors(observed, observed_periods, simulated_periods)


def throttled_share(throttled_s: float, throttled_periods: float, cfs_rqs: int, period_us: int) -> float:
    """Throttled seconds per throttled period, as a share of the most there can
    be: each of ``cfs_rqs`` runqueues (a CPU each) throttled the whole period.
    The kernel counts a runqueue's throttled time only while it has runnable
    tasks of the group (throttle_cfs_rq .. unthrottle_cfs_rq, summed into
    cfs_b->throttled_time), so this says how many CPUs had work held back."""
    return throttled_s / (throttled_periods * cfs_rqs * period_us / 1e6)


def seconds_bound(observed: float, observed_periods: float, simulated_periods: float, windows: int, cfs_rqs: int, period_us: int) -> float:
    """How far a simulated :func:`throttled_share` may be from the observed one:
    two standard errors of each side's mean over its throttled periods (a
    period's share lies in [0, 1], so its variance is at most p(1 - p)), plus
    the counter's resolution (a reading at each end of each window, over the
    most there can be). Its timing does not enter: throttled seconds and
    throttled periods are one read of cpu.stat, so their ratio is the same
    whenever the window's ends were read."""
    resolution = 2 * windows * THROTTLED_RESOLUTION_S / (max(observed_periods, 1) * cfs_rqs * period_us / 1e6)
    return two_standard_errors(observed, observed_periods, simulated_periods) + resolution


def node_cpus(c: Container, threads: int) -> int:
    """The CPUs simulated: the node's (machine_cpu_cores) where scraped; else
    NODE_CPUS, or more for a quota or threads beyond it."""
    if c.node_cpus:
        return c.node_cpus
    w = c.windows[-1]
    quota_cpus = math.ceil((w.quota_us or 0) / w.period_us)
    return max(NODE_CPUS, min(64, max(threads, quota_cpus + 1)))


def _neighbours(doc: dict[str, Any], other_cpus: float, cpus: int) -> dict[str, Any]:
    """``doc`` with the node's other load beside the container, where there is
    any: NODE_BURST_US bursts at Poisson times on ``cpus`` threads, in a cgroup
    without a limit."""
    if other_cpus < MIN_OTHER_CPUS:
        return doc
    node = {"name": "node", "cgroup": "node", "workers": cpus, "arrival": "poisson", "rate_per_s": round(other_cpus * 1e6 / NODE_BURST_US, 3), "cost_us": NODE_BURST_US}
    return {**doc, "cgroup": doc["cgroup"] + [{"name": "node"}], "service": doc.get("service", []) + [node]}


def _task_text(name: str, task: str, phases: list[dict], other_cpus: float = 0.0, cpus: int = 1) -> str:
    """SCENARIO's machine and cgroup, named ``name``, with one task ``task``
    (one thread) running ``phases`` in place of the service, and the node's
    other load beside it."""
    doc = {**_WINDOW, "name": name, "task": [{"name": task, "cgroup": "container", "threads": 1, "phases": phases}]}
    return scenario_toml(_COMMENT, _neighbours(doc, other_cpus, cpus))


def aligned_text(model: Model, demand_cpus: float, other_cpus: float = 0.0, cpus: int = 1) -> str:
    """SCENARIO's machine and cgroup with the model's task, its phases at
    ``demand_cpus``: K x (run, timer) then the rest; or run and timer only,
    where it never rests."""
    k = wakes(model, demand_cpus)
    if model.timed:  # rt-app's runtime and timer (relative mode, its default)
        wake = [{"runtime_us": model.burst_us}, {"timer": {"period_us": model.timer_us}}]
    else:
        wake = [{"run_us": model.burst_us}, {"timer_us": model.timer_us}]
    phases = wake if k is None else wake * k + [{"sleep_us": model.rest_us}]
    return _task_text("prometheus-window-aligned", "aligned", phases, other_cpus, cpus)


def closed_text(model: Model, demand_cpus: float, other_cpus: float = 0.0, cpus: int = 1) -> str:
    """SCENARIO's machine and cgroup with the model's task as a closed loop:
    run, then sleep (run only where it never sleeps)."""
    sleep = sleep_us(model, demand_cpus)
    phases = [{"run_us": model.burst_us}] + ([{"sleep_us": sleep}] if sleep else [])
    return _task_text("prometheus-window-closed", "loop", phases, other_cpus, cpus)


def window_run(model: Model, demand_cpus: float, quota_us: Optional[int], period_us: int, cpus: int, seed: int = 1, other_cpus: float = 0.0) -> Run:
    """One simulation of ``demand_cpus`` under ``model`` at cpu.max ``quota_us period_us``,
    with ``other_cpus`` of the node's other load beside it."""
    quota = "max" if quota_us is None else quota_us
    if model.aligned or model.closed:
        text = aligned_text(model, demand_cpus, other_cpus, cpus) if model.aligned else closed_text(model, demand_cpus, other_cpus, cpus)
        return Run(text, (
            f"machine.cpus={cpus}", f"duration_s={SIM_S}", f"seed={seed}",
            f"cgroup.container.period_us={period_us}", f"cgroup.container.quota_us={quota}", f"task.{'aligned' if model.aligned else 'loop'}.threads={model.threads}",
        ))
    rate = demand_cpus * 1e6 / model.burst_us
    text = SCENARIO if other_cpus < MIN_OTHER_CPUS else scenario_toml(_COMMENT, _neighbours(_SERVICE, other_cpus, cpus))
    return Run(text, (
        f"machine.cpus={cpus}", f"duration_s={SIM_S}", f"seed={seed}",
        f"cgroup.container.period_us={period_us}", f"cgroup.container.quota_us={quota}",
        f"service.bursts.workers={model.threads}", f"service.bursts.cost_us={model.burst_us}",
        f"service.bursts.rate_per_s={rate:.6g}",
    ) + ((f"service.bursts.cost_cv={model.cost_cv:g}",) if model.cost_cv else ()))


def request_p99_us(doc: dict[str, Any]) -> Optional[float]:
    """A service model's p99 request latency (from arrival: waiting for a
    thread, running, throttled); None for the aligned and closed families,
    which have no requests."""
    task = doc["tasks"].get("bursts")
    return None if task is None or "latency_us" not in task else float(task["latency_us"]["p99"])


def _measured(doc: dict[str, Any]) -> tuple[float, float, int]:
    """A simulation's usage (CPUs), throttled ratio and periods."""
    cg = doc["cgroups"]["container"]
    return cg["usage_usec"] / (doc["duration_s"] * 1e6), cg["throttled_ratio"], cg["nr_periods"]


def seconds_miss(band: Band, doc: dict[str, Any], cfs_rqs: int, period_us: int) -> float:
    """How far a simulation's throttled seconds per throttled period are from
    the band's, in units of :func:`seconds_bound`; 0 where either side was
    never throttled (the throttled ratio judges that)."""
    cg = doc["cgroups"]["container"]
    if not band.throttled_periods or not cg["nr_throttled"]:
        return 0.0
    observed = throttled_share(band.throttled_s, band.throttled_periods, cfs_rqs, period_us)
    simulated = throttled_share(cg["throttled_usec"] / 1e6, cg["nr_throttled"], cfs_rqs, period_us)
    return abs(simulated - observed) / seconds_bound(observed, band.throttled_periods, cg["nr_throttled"], band.windows, cfs_rqs, period_us)


def active_miss(band: Band, periods: float, period_us: int) -> float:
    """How far a simulation's share of periods with work is from the band's,
    in units of :func:`ratio_bound`."""
    possible = band.seconds * 1e6 / period_us
    observed, simulated = min(1.0, band.periods / possible), min(1.0, periods * period_us / (SIM_S * 1e6))
    return abs(simulated - observed) / ratio_bound(observed, possible, SIM_S * 1e6 / period_us)


@dataclass(frozen=True)
class Variant:
    """A consistent model with the demand it needs in each band (CPUs)."""

    model: Model
    demands: tuple[float, ...]
    #: Its p99 request latency (us) in each band at the container's own limit
    #: (service models only: empty for the aligned and closed families).
    p99_us: tuple[float, ...] = ()


class Fit:
    """One container's bands, its models and, after :meth:`take`, the consistent
    ones: each model with the least and the most demand per band that reproduce
    the band (two variants, or one where they agree)."""

    def __init__(self, c: Container):
        self.container = c
        self.bands = bands(c.windows)
        last = c.windows[-1]
        self.quota_us, self.period_us = last.quota_us, last.period_us
        threads = max(w.threads for w in c.windows)
        self.counts = counts = (threads,) if threads > 0 else THREADS_UNKNOWN
        self.models = independent_models(counts)
        #: How many models were tried, over the families.
        self.tried = len(self.models)
        self.cpus = node_cpus(c, max(counts))
        #: Throttled seconds are fitted only on the node's own CPU count.
        self.fits_seconds = bool(c.node_cpus)
        quota_cpus = (self.quota_us or 0) / self.period_us
        #: Each band's demands tried: near the limit, the demand may exceed what it let through.
        #: The multiples a band that may have held demand back is tried at.
        self.demand_factors = SECONDS_FACTORS if self.fits_seconds else DEMAND_FACTORS
        self.factors = [self.demand_factors if b.usage_cpus >= NEAR_LIMIT * quota_cpus else (1.0,) for b in self.bands]
        self.slots = [(m, i, f) for m in self.models for i in range(len(self.bands)) for f in self.factors[i]]
        self.consistent: list[Variant] = []
        #: Models within every band's bound but biased low over them (BIAS_Z).
        self.biased_low = 0
        #: The families :meth:`widen` has added so far (0: the independent one only).
        self.stage = 0
        self.closest: tuple[float, Model] = (math.inf, self.models[0])

    def widen(self) -> bool:
        """Where no model reproduced the counters (after :meth:`take`), the next
        families: after the independent one, the closed loop and the aligned
        family, together (each consistent model counts in the search); after
        those, the aligned family's timed kind. True when :meth:`runs` now gives
        their runs."""
        stages = (lambda: closed_models(self.counts) + aligned_models(self.counts), lambda: aligned_models(self.counts, timed=True))
        if self.consistent or self.stage >= len(stages):
            return False
        self.models = stages[self.stage]()
        self.stage += 1
        self.tried += len(self.models)
        # Bursts that wake together are throttled at a low mean usage (the
        # kubernetes-mixin #108 shape): any throttled band may have held demand back.
        self.factors = [self.demand_factors if b.throttled_ratio > 0 else f for b, f in zip(self.bands, self.factors)]
        self.slots = [(m, i, f) for m in self.models for i in range(len(self.bands)) for f in self.factors[i]]
        return True

    @property
    def unbounded(self) -> bool:
        """Some consistent model reproduces every band at the most demand tried
        (the top of :attr:`demand_factors` times its usage): the container sat at its limit
        throughout, and its counters say nothing of how far its demand went
        above it (the search would take the highest, a guess)."""
        top = self.demand_factors[-1] * (1 - 1e-9)
        return any(all(d >= top * b.usage_cpus for d, b in zip(v.demands, self.bands)) for v in self.consistent)

    @property
    def consistent_models(self) -> list[Model]:
        return list(dict.fromkeys(v.model for v in self.consistent))

    def runs(self) -> list[Run]:
        """Every model in every band, at every demand tried, at the container's own limit."""
        return [
            window_run(m, f * self.bands[i].usage_cpus, self.quota_us, self.period_us, self.cpus, other_cpus=self.bands[i].other_cpus)
            for m, i, f in self.slots
        ]

    def take(self, docs: Sequence[dict[str, Any]]) -> None:
        """Keep the models whose simulations (in :meth:`runs`' order) reproduce
        every band at some demand."""
        misses: dict[Model, list[dict[float, float]]] = {m: [{} for _ in self.bands] for m in self.models}
        p99s: dict[tuple[Model, int, float], Optional[float]] = {}
        zs: dict[tuple[Model, int, float], float] = {}
        for (m, i, f), doc in zip(self.slots, docs):
            p99s[m, i, f] = request_p99_us(doc)
            band = self.bands[i]
            usage, ratio, periods = _measured(doc)
            zs[m, i, f] = (ratio - band.throttled_ratio) / (two_standard_errors(band.throttled_ratio, band.periods, periods) / 2)
            usage_miss = abs(usage - band.usage_cpus) / (USAGE_TOLERANCE * band.usage_cpus + 0.01)
            ratio_miss = abs(ratio - band.throttled_ratio) / ratio_bound(band.throttled_ratio, band.periods, periods)
            # An aligned model rests: it must rest as much as the container did.
            periods_miss = active_miss(band, periods, self.period_us) if m.aligned else 0.0
            cfs_rqs = min(m.threads, self.cpus)  # runqueues that can hold its threads
            s_miss = seconds_miss(band, doc, cfs_rqs, self.period_us) if self.fits_seconds else 0.0
            misses[m][i][f] = max(usage_miss, ratio_miss, periods_miss, s_miss)  # in units of its bound
        for m in self.models:
            worst = max(min(per_band.values()) for per_band in misses[m])
            passing = [[f for f, miss in per_band.items() if miss <= 1] for per_band in misses[m]]
            if worst <= 1 and m.family == "independent" and len(passing) >= BIAS_BANDS:
                # Biased low even at the demands (within the bound) that
                # throttle most: the least demand is low by its choice.
                z = sum(max(zs[m, i, f] for f in fs) for i, fs in enumerate(passing)) / math.sqrt(len(passing))
                if z < -BIAS_Z:
                    self.biased_low += 1
                    continue
            if worst < self.closest[0]:
                self.closest = (worst, m)
            if worst > 1:
                continue
            for pick in (min, max):
                chosen = [pick(fs) for fs in passing]
                p99 = tuple(p99s[m, i, f] for i, f in enumerate(chosen))
                v = Variant(m, tuple(f * b.usage_cpus for f, b in zip(chosen, self.bands)), () if None in p99 else p99)  # type: ignore[arg-type]
                if v not in self.consistent:
                    self.consistent.append(v)


@dataclass(frozen=True)
class Prediction(Outcome):
    """advise's Outcome (the worst model) with the most hopeful model beside it."""

    best_ratio: float = 0.0


class Plan:
    """advise.bisect_all's evaluation for one container: a setting is simulated
    under every consistent model in every band; the outcome is the worst model's
    throttled ratio, each model's ratio its bands' weighted by their periods."""

    def __init__(self, fit: Fit, max_throttled: float, observed_p99_ms: Optional[float] = None, max_p99_ms: Optional[float] = None):
        self.fit, self.max_throttled = fit, max_throttled
        #: The container's observed p99 (its latency histogram's), and the target for it.
        self.observed_p99_ms, self.max_p99_ms = observed_p99_ms, max_p99_ms

    @property
    def predicts_p99(self) -> bool:
        """A latency histogram was read and every consistent model serves requests."""
        return self.observed_p99_ms is not None and all(v.p99_us for v in self.fit.consistent)

    def runs(self, setting: Setting) -> list[Run]:
        quota_us, period_us, _ = setting
        return [
            window_run(v.model, d, quota_us, period_us, self.fit.cpus, other_cpus=b.other_cpus)
            for v in self.fit.consistent for d, b in zip(v.demands, self.fit.bands)
        ]

    def outcome(self, docs: Sequence[dict[str, Any]]) -> Prediction:
        n, bands = len(self.fit.bands), self.fit.bands
        total = sum(b.periods for b in bands) or 1
        ratios, usage, p99s = [], 0.0, []
        for k, v in enumerate(self.fit.consistent):
            measured = [_measured(d) for d in docs[k * n : (k + 1) * n]]
            ratios.append(sum(b.periods * m[1] for b, m in zip(bands, measured)) / total)
            usage = max(usage, max(m[0] for m in measured))
            if self.predicts_p99:
                # The observed p99 moved by the model's own change in p99 at
                # this setting, in its band that changes most (docs/prometheus.md, "Latency").
                shift_us = max(request_p99_us(d) - base for d, base in zip(docs[k * n : (k + 1) * n], v.p99_us))  # type: ignore[operator]
                p99s.append(max(0.0, self.observed_p99_ms + shift_us / 1e3))  # type: ignore[operator]
        worst = max(ratios)
        p99 = max(p99s) if p99s else None
        meets = worst <= self.max_throttled and (self.max_p99_ms is None or p99 is None or p99 <= self.max_p99_ms)
        return Prediction(worst, p99, usage, meets, min(ratios))

    def bisection(self):  # advise.Bisection
        demand = max(max(v.demands) for v in self.fit.consistent)
        return bisect(self.fit.cpus, self.fit.period_us, 0.0, demand)


def recommended(candidate: dict[str, Any], cpus: int) -> Setting:
    """advise's HEADROOM over the boundary the bisection found."""
    s = _with_headroom(candidate, cpus)
    return (s["quota_us"], s["period_us"], 0)
