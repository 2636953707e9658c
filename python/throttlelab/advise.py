"""``throttlelab advise``: the smallest cpu.max for a cgroup that meets a target.

The target: the cgroup's throttled_ratio at most ``max_throttled`` and, when given,
every service's p99 latency at most ``max_p99_ms``, in every one of ``seeds`` seeds.
For each candidate period (10, 20, 50, 100, 200 ms and the scenario's own, or the one
period the platform allows) and burst (none, and fractions of the quota where the
profile and the platform have cpu.max.burst), the quota is
bisected between 1 ms and an upper bound that meets the target: the unlimited
demand with headroom, else every CPU of the machine. Throttling falls as quota
grows, so bisection holds; it stops at 2 % of the quota or 1 ms. Candidates are
ranked by CPUs (quota / period); ties go to the longer period, then the smaller
burst.

A boundary found on N seeds is the luckiest of many noisy measurements: on other
seeds it misses the target about half the time. So the recommendation is the best
candidate's quota plus HEADROOM, checked on N further seeds (the holdout); the
first candidate that passes there wins. When none does, or not even every CPU of the
machine meets the target at any period, the honest answer is to remove the limit; and
when only every CPU of the machine meets it, that is what it is. The scenario's
current limit is evaluated too, to be shown first.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterable, NamedTuple, Optional, Sequence

from throttlelab import _native, captured
from throttlelab.platforms import PLATFORMS, Platform, for_cgroup
from throttlelab.runner import Run, Runner
from throttlelab.scenarios import PathArg
from throttlelab.terminal import table

if TYPE_CHECKING:
    from rich.console import RenderableType

CANDIDATE_PERIODS_US = (10_000, 20_000, 50_000, 100_000, 200_000)
#: Bursts tried, as fractions of the quota (cpu.max.burst <= quota).
BURST_FRACTIONS = (0.0, 0.25, 0.5, 1.0)
MIN_QUOTA_US = 1000  # the kernel's minimum quota
QUOTA_STEP_US = 100  # quotas are tried in whole multiples of this
RESOLUTION = 0.02  # bisection stops at this fraction of the quota (or at MIN_QUOTA_US)
#: The first upper bound tried: the unlimited demand times this.
DEMAND_HEADROOM = 1.5
#: The recommendation's margin over the boundary found (measured on request-service:
#: +10 % met the target on 4 of 4 fresh seed sets for 7 targets, the boundary on 3 of 28).
HEADROOM = 0.10


class AdviseError(ValueError):
    """The target cannot be asked of this scenario (a user error: exit code 2)."""


#: Exit code of ``advise`` when not even removing the limit meets the target.
EXIT_UNMET = 1


@dataclass(frozen=True)
class Search:
    """What every evaluation shares: the scenario, the cgroup, the target and the seeds."""

    text: str
    overrides: tuple[str, ...]
    cgroup: str
    max_throttled: float
    max_p99_ms: Optional[float]
    seeds: tuple[int, ...]
    machine_cpus: int


@dataclass(frozen=True)
class Outcome:
    """The worst of the seeds for one cpu.max setting (quota None: unlimited)."""

    throttled_ratio: float
    p99_ms: Optional[float]
    usage_cpus: float  # the most CPUs the cgroup used on average in any seed
    meets: bool

    def as_row(self) -> dict[str, Any]:
        row = asdict(self)
        if self.p99_ms is None:
            del row["p99_ms"]
        return row


#: One cpu.max setting: quota (None: unlimited), period and burst, in us.
Setting = tuple[Optional[int], int, int]


def _runs(search: Search, setting: Setting) -> list[Run]:
    """One run per seed of ``search`` with ``setting`` as the cgroup's cpu.max."""
    quota_us, period_us, burst_us = setting
    quota = "max" if quota_us is None else quota_us
    limit = [f"cgroup.{search.cgroup}.quota_us={quota}", f"cgroup.{search.cgroup}.period_us={period_us}"]
    if burst_us:
        limit.append(f"cgroup.{search.cgroup}.burst_us={burst_us}")
    return [(search.text, [*search.overrides, *limit, f"seed={seed}"]) for seed in search.seeds]


def _outcome(search: Search, docs: Sequence[dict[str, Any]]) -> Outcome:
    """The worst throttled ratio and p99 of one setting's runs (one per seed).
    A run that stopped (``Run.stop``) missed: only ``meets`` may be read."""
    throttled, usage, p99s = 0.0, 0.0, []
    for doc in docs:
        cg = doc["cgroups"][search.cgroup]
        throttled = max(throttled, cg["throttled_ratio"])
        usage = max(usage, cg["usage_usec"] / (doc["duration_s"] * 1e6))
        p99s += [t["latency_us"]["p99"] / 1e3 for t in doc["tasks"].values() if "latency_us" in t]
    p99_ms = max(p99s) if p99s else None
    meets = not any("stopped" in doc for doc in docs) and throttled <= search.max_throttled and (
        search.max_p99_ms is None or p99_ms is None or p99_ms <= search.max_p99_ms
    )
    return Outcome(throttled, p99_ms, usage, meets)


def evaluate(runner: Runner, search: Search, quota_us: Optional[int], period_us: int, burst_us: int) -> Outcome:
    """Simulate every seed with this cpu.max; the worst throttled ratio and p99."""
    return _outcome(search, runner.run_many(_runs(search, (quota_us, period_us, burst_us))))


def _quota(us: float) -> int:
    """``us`` rounded up to a whole QUOTA_STEP_US, at least the kernel's minimum."""
    return max(MIN_QUOTA_US, -(-int(us) // QUOTA_STEP_US) * QUOTA_STEP_US)


def _burst(fraction: float, quota_us: int) -> int:
    """``fraction`` of the quota, rounded down to a whole QUOTA_STEP_US (so <= quota)."""
    return int(fraction * quota_us) // QUOTA_STEP_US * QUOTA_STEP_US


class Ask(NamedTuple):
    """A setting a bisection wants evaluated. ``judged_only``: a miss's numbers
    are not kept, only that it missed, so its seeds may stop at the first that
    misses (the worst of more seeds can only be worse)."""

    setting: Setting
    judged_only: bool


#: A search that yields the settings it wants evaluated, is sent each one's
#: outcome, and returns its candidate row.
Bisection = Generator[Ask, Outcome, dict[str, Any]]


def bisect(machine_cpus: int, period_us: int, burst_fraction: float, demand_cpus: float) -> Bisection:
    """The smallest quota that meets the target at this period and burst fraction
    (within RESOLUTION), as a candidate row.

    Invariant: ``hi`` meets the target, ``lo`` does not (``MIN_QUOTA_US - 1`` stands
    for "below the kernel's minimum"). Without any ``hi`` the candidate is the whole
    machine, failing."""

    def at(quota_us: int) -> Setting:
        return (quota_us, period_us, _burst(burst_fraction, quota_us))

    full_us = machine_cpus * period_us
    hi = min(full_us, _quota(demand_cpus * DEMAND_HEADROOM * period_us))
    # A miss is kept (in the row) only at the whole machine.
    best = yield Ask(at(hi), judged_only=hi < full_us)
    if not best.meets and hi < full_us:
        hi = full_us
        best = yield Ask(at(hi), judged_only=False)
    if best.meets:
        lo = MIN_QUOTA_US - 1
        while hi - lo > max(MIN_QUOTA_US, RESOLUTION * hi):
            mid = _quota((lo + hi) / 2)
            if mid >= hi:
                break
            outcome = yield Ask(at(mid), judged_only=True)
            if outcome.meets:
                hi, best = mid, outcome
            else:
                lo = mid
    row = {
        "quota_us": hi,
        "period_us": period_us,
        "burst_us": _burst(burst_fraction, hi),
        "burst_fraction": burst_fraction,
        "cpus": hi / period_us,
        "throttled_ratio": best.throttled_ratio,
        "meets": best.meets,
    }
    if best.p99_ms is not None:
        row["p99_ms"] = best.p99_ms
    return row


@dataclass(frozen=True)
class _SearchPlan:
    """How bisect_all evaluates a setting: ``search``'s seeds, their worst."""

    search: Search

    def runs(self, setting: Setting) -> list[Run]:
        return _runs(self.search, setting)

    def stages(self, setting: Setting) -> list[list[Run]]:
        """The runs one seed at a time, for a setting that may stop at a miss;
        each run also stops once its cgroup's throttling is certain to miss
        (``Run.stop``: the engine's bound, docs/engine.md "stop7")."""
        stop = (self.search.cgroup, self.search.max_throttled)
        return [[Run(text, overrides, stop=stop)] for text, overrides in self.runs(setting)]

    def outcome(self, docs: Sequence[dict[str, Any]]) -> Outcome:
        return _outcome(self.search, docs)


def evaluate_all(runner: Runner, asks: Sequence[tuple[Any, Ask]]) -> list[Any]:
    """The outcome of every ``(plan, ask)``, their runs in shared batches. A
    judged-only ask whose plan has ``stages(setting)`` (advise's: seed by seed)
    runs stage by stage and stops at the first stage after which it misses:
    about a third of advise's runs (docs/engine.md, "Where advise's time goes").
    Its outcome is then the worst of the seeds run, and only ``meets`` is read."""
    todo = [
        plan.stages(ask.setting) if ask.judged_only and hasattr(plan, "stages") else [plan.runs(ask.setting)]
        for plan, ask in asks
    ]
    docs: list[list[dict[str, Any]]] = [[] for _ in asks]
    outcomes: list[Any] = [None] * len(asks)
    pending = list(range(len(asks)))
    while pending:
        stage = [todo[i].pop(0) for i in pending]
        ran = runner.run_many([run for runs in stage for run in runs])
        k = 0
        for i, runs in zip(pending, stage):
            docs[i] += ran[k : k + len(runs)]
            k += len(runs)
            outcome = asks[i][0].outcome(docs[i])
            if not todo[i] or not outcome.meets:
                outcomes[i] = outcome
        pending = [i for i in pending if outcomes[i] is None]
    return outcomes


def bisect_all(
    runner: Runner, search: Optional[Search], bisections: Sequence[Bisection], step: Callable[[], None], plans: Optional[Sequence[Any]] = None,
) -> tuple[list[dict[str, Any]], int]:
    """Every bisection's candidate row, and the number of runs they judged (a
    setting's seeds, also those not run after one missed). The bisections
    advance in lockstep: each round, the next setting of every one still
    searching, in shared batches for the runner (:func:`evaluate_all`);
    ``step()`` as each one finishes. ``plans`` (one per bisection, with
    ``runs(setting)`` and ``outcome(docs)``) evaluate instead of ``search``:
    advise --prometheus's containers, each its own."""
    plans = plans or [_SearchPlan(search)] * len(bisections)  # type: ignore[arg-type]
    rows: list[Any] = [None] * len(bisections)
    wanted = {i: next(b) for i, b in enumerate(bisections)}
    runs = 0
    while wanted:
        asked = list(wanted.items())
        outcomes = evaluate_all(runner, [(plans[i], ask) for i, ask in asked])
        for (i, ask), outcome in zip(asked, outcomes):
            runs += len(plans[i].runs(ask.setting))
            try:
                wanted[i] = bisections[i].send(outcome)
            except StopIteration as done:
                rows[i] = done.value
                del wanted[i]
                step()
    return rows, runs


def _preference(row: dict[str, Any]) -> tuple[Any, ...]:
    """Sort key: meeting candidates first, fewest CPUs, longer period, smaller burst."""
    return (not row["meets"], Fraction(row["quota_us"], row["period_us"]), -row["period_us"], row["burst_us"])


def pick_cgroup(resolved: dict[str, Any], cgroup: Optional[str]) -> str:
    """The cgroup asked for (checked), or the scenario's only limited one (its
    only one, if none is limited)."""
    names = [g["name"] for g in resolved["cgroups"]]
    if cgroup is not None:
        if cgroup not in names:
            raise AdviseError(f"no cgroup {cgroup!r} in {resolved['name']} (cgroups: {', '.join(names) or 'none'})")
        return cgroup
    limited = [g["name"] for g in resolved["cgroups"] if g["quota_us"] is not None]
    if len(limited) == 1 or (not limited and len(names) == 1):
        return (limited or names)[0]
    which = f"limited cgroups: {', '.join(limited)}" if limited else f"cgroups: {', '.join(names) or 'none'}"
    raise AdviseError(f"--cgroup: which cgroup of {resolved['name']}? ({which})")


def advise_text(
    text: str,
    cgroup: Optional[str],
    max_throttled: float,
    max_p99_ms: Optional[float] = None,
    seeds: int = 3,
    overrides: Iterable[str] = (),
    workers: Optional[int] = None,
    step: Optional[Callable[[], None]] = None,
    on_total: Optional[Callable[[int], None]] = None,
    platform: str = "cgroup",
) -> dict[str, Any]:
    """:func:`advise` on scenario ``text``; ``on_total(n)`` learns the number of
    candidates, ``step()`` follows each one, for a progress bar."""
    if platform not in PLATFORMS:
        raise AdviseError(f"unknown platform {platform!r} (choose {', '.join(PLATFORMS)})")
    at_limit = captured.at_limit(text)
    # A capture knows its cgroup's path, so which files it has.
    where = for_cgroup(platform, captured.cgroup_version(at_limit["source"]) if at_limit else None)
    if not 0 <= max_throttled <= 1:
        raise AdviseError(f"--max-throttled must be a ratio in 0..1, got {max_throttled}")
    if seeds < 1:
        raise AdviseError(f"--runs must be at least 1, got {seeds}")
    overrides = tuple(overrides)
    resolved = json.loads(_native.validate(text, list(overrides)))
    groups = {g["name"]: g for g in resolved["cgroups"]}
    cgroup = pick_cgroup(resolved, cgroup)
    if max_p99_ms is not None and not resolved["services"]:
        raise AdviseError(f"--max-p99-ms needs a [[service]]; {resolved['name']} has none")
    search = Search(text, overrides, cgroup, max_throttled, max_p99_ms, tuple(range(1, seeds + 1)), resolved["machine"]["cpus"])
    holdout = replace(search, seeds=tuple(range(seeds + 1, 2 * seeds + 1)))

    own = groups[cgroup]
    periods = list(where.periods_us or sorted({*CANDIDATE_PERIODS_US, own["period_us"]}))
    burst = where.burst and _native.profile_has_burst(resolved["kernel"]["profile"])
    bursts = BURST_FRACTIONS if burst else (0.0,)
    if on_total:
        on_total(len(periods) * len(bursts) + 2)
    step = step or (lambda: None)
    current = (own["quota_us"], own["period_us"], own["burst_us"])
    with Runner(workers=workers) as runner:
        # Both in one batch: 2 workers take 3 runs' time for their 6 runs, not 2 + 2 for two batches of 3.
        plan = _SearchPlan(search)
        now, unlimited = evaluate_all(runner, [(plan, Ask(current, False)), (plan, Ask((None, own["period_us"], 0), False))])
        step()
        step()
        bisections = [bisect(search.machine_cpus, p, b, unlimited.usage_cpus) for p in periods for b in bursts]
        rows, runs = bisect_all(runner, search, bisections, step)
        runs += 2 * seeds
        candidates = sorted(rows, key=_preference)
        recommendation = None
        for candidate in (c for c in candidates if c["meets"]):
            setting = _with_headroom(candidate, search.machine_cpus)
            checked = evaluate(runner, holdout, **setting)
            runs += seeds
            candidate["holdout_meets"] = checked.meets
            if checked.meets:
                recommendation = {**setting, "from_quota_us": candidate["quota_us"], "holdout": checked.as_row()}
                break
    whole_machine = recommendation is not None and recommendation["quota_us"] >= search.machine_cpus * recommendation["period_us"]
    result = {
        "scenario": resolved["name"],
        "platform": where.name,
        # The raw cgroup files written: "v1", "v2", or None for both.
        "cgroup_version": where.version,
        "recommendation": recommendation,
        "remove_limit": recommendation is None or whole_machine,
        "met": recommendation is not None or unlimited.meets,
        "current": {"quota_us": current[0], "period_us": current[1], "burst_us": current[2], **now.as_row()},
        "candidates": candidates,
        "unlimited": unlimited.as_row(),
        "target": {"cgroup": cgroup, "max_throttled": max_throttled, "max_p99_ms": max_p99_ms, "seeds": seeds},
        "holdout_seeds": list(holdout.seeds),
        "headroom": HEADROOM,
        "runs": runs,
    }
    if at_limit:
        result["capture"] = at_limit
    return result


def _where(result: dict[str, Any]) -> Platform:
    """The platform a result is in, with its cgroup files."""
    return for_cgroup(result["platform"], result.get("cgroup_version"))


def _with_headroom(candidate: dict[str, Any], machine_cpus: int) -> dict[str, int]:
    """The cpu.max of ``candidate`` with HEADROOM more quota (at most every CPU), the
    burst the same fraction of it."""
    period_us = candidate["period_us"]
    quota_us = min(machine_cpus * period_us, _quota(candidate["quota_us"] * (1 + HEADROOM)))
    return {"quota_us": quota_us, "period_us": period_us, "burst_us": _burst(candidate["burst_fraction"], quota_us)}


def advise(
    scenario: PathArg,
    cgroup: Optional[str],
    max_throttled: float,
    max_p99_ms: Optional[float] = None,
    seeds: int = 3,
    *,
    set: Optional[Sequence[str]] = None,
    platform: str = "cgroup",
) -> dict[str, Any]:
    """The smallest cpu.max (quota, period, burst) for ``cgroup`` of ``scenario`` (a
    built-in name, a path or TOML text) that keeps its throttled_ratio at most
    ``max_throttled`` and every service's p99 at most ``max_p99_ms`` in all ``seeds``
    seeds, among what ``platform`` (cgroup, kubernetes, docker, systemd) can set.
    Returns ``{"recommendation": {quota_us, period_us, burst_us} or None,
    "remove_limit", "met", "current", "candidates", "unlimited", "target", "runs"}``."""
    from throttlelab import scenario_text

    return advise_text(scenario_text(scenario), cgroup, max_throttled, max_p99_ms, seeds, set or (), platform=platform)


def _percent(ratio: float) -> str:
    return f"{100 * ratio:g} %"


def explain(result: dict[str, Any]) -> str:
    """The recommendation, or why there is none, in one sentence, in the platform's units."""
    target, rec = result["target"], result["recommendation"]
    where = _where(result)
    seeds = target["seeds"]
    goal = f"throttling at or below {_percent(target['max_throttled'])}"
    if target["max_p99_ms"] is not None:
        goal += f" and p99 latency at or below {target['max_p99_ms']:g} ms"
    holdout = result["holdout_seeds"]
    holdout_text = f"seeds {holdout[0]}-{holdout[-1]}" if len(holdout) > 1 else f"seed {holdout[0]}"
    if rec and not result["remove_limit"]:
        boundary = next(c for c in result["candidates"] if c.get("holdout_meets"))
        return (
            f"Set {where.setting(rec['quota_us'], rec['period_us'], rec['burst_us'])}"
            f" ({rec['quota_us'] / rec['period_us']:.2f} CPUs): {_percent(result['headroom'])} more quota than the"
            f" smallest limit that kept {goal} in all {seeds} seeds"
            f" ({where.setting(boundary['quota_us'], boundary['period_us'], boundary['burst_us'])});"
            f" it also met the target in {holdout_text}."
        )
    if rec:
        return f"Remove the limit: only every CPU of the machine kept {goal} in all {seeds} seeds and in {holdout_text}."
    unlimited = result["unlimited"]
    if not unlimited["meets"]:
        p99 = f"worst p99 {unlimited['p99_ms']:g} ms, " if "p99_ms" in unlimited else ""
        return (
            f"Remove the limit and relax the target: not even an unlimited cgroup kept {goal}"
            f" ({p99}throttled {_percent(unlimited['throttled_ratio'])})."
        )
    if not any(c["meets"] for c in result["candidates"]):
        return f"Remove the limit: not even every CPU of the machine per period kept {goal} in all {seeds} seeds."
    return (
        f"Remove the limit: every quota that kept {goal} in seeds 1-{seeds} missed it in"
        f" {holdout_text}, even with {_percent(result['headroom'])} more quota."
    )


def apply(result: dict[str, Any]) -> str:
    """What to apply on the platform: its snippet for the recommendation, or for no limit."""
    where, rec = _where(result), result["recommendation"]
    if result["remove_limit"]:
        return where.snippet(None, result["current"]["period_us"], 0)
    return where.snippet(rec["quota_us"], rec["period_us"], rec["burst_us"])


#: Candidates shown beside the recommendation.
SHOWN = 6


def render(result: dict[str, Any]) -> list[RenderableType]:
    """The recommendation in a sentence and what to apply, then the current
    limit (and what the kernel measured at it over a capture), the best
    candidates, the recommendation with its margin, and the unlimited cgroup."""
    from rich.text import Text

    where = _where(result)
    with_p99 = "p99_ms" in result["unlimited"]
    holdout = result["holdout_seeds"]
    margin = f"+{100 * result['headroom']:g} %"
    cols = [where.name if where.name != "cgroup" else "cgroup files", "CPUs", "margin", "throttled %"] + (["p99 ms"] if with_p99 else [])
    cols += ["meets", "holdout"]
    t = table(
        f"options for {result['target']['cgroup']}: worst of seeds 1-{result['target']['seeds']}; a boundary is the"
        f" smallest limit that met the target, the recommendation it plus {100 * result['headroom']:g} % quota, checked in seeds"
        f" {holdout[0]}-{holdout[-1]} ({result['runs']} runs)",
        cols, left=(cols[0], "margin", "meets", "holdout"),
    )

    def add(limit: str, cpus: str, kind: str, outcome: dict[str, Any], checked: str) -> None:
        p99 = [f"{outcome['p99_ms']:.1f}" if "p99_ms" in outcome else ""] if with_p99 else []
        meets = {True: "yes", False: "no"}.get(outcome.get("meets"), "")
        t.add_row(limit, cpus, kind, f"{100 * outcome['throttled_ratio']:.1f}", *p99, meets, checked)

    current = result["current"]
    if current["quota_us"] is None:
        add("current: no limit", f"{current['usage_cpus']:.2f} used", "", current, "")
    else:
        limit = where.setting(current["quota_us"], current["period_us"], current["burst_us"] if where.burst else 0)
        add(f"current: {limit}", f"{current['quota_us'] / current['period_us']:.2f}", "", current, "")
    if "capture" in result:
        cap = result["capture"]
        add("  as captured (the kernel's cpu.stat)", f"{cap['usage_cpus']:.2f} used", "", {"throttled_ratio": cap["throttled_ratio"]}, "")
    for c in result["candidates"][:SHOWN]:
        checked = {True: f"yes ({margin})", False: f"no ({margin})"}.get(c.get("holdout_meets"), "")
        add(where.setting(c["quota_us"], c["period_us"], c["burst_us"]), f"{c['cpus']:.2f}", "boundary", c, checked)
    rec = result["recommendation"]
    if rec and not result["remove_limit"]:
        add(where.setting(rec["quota_us"], rec["period_us"], rec["burst_us"]),
            f"{rec['quota_us'] / rec['period_us']:.2f}", margin, rec["holdout"], "yes: recommended")
    unlimited = result["unlimited"]
    add("no limit" + (" (recommended)" if result["remove_limit"] else ""), f"{unlimited['usage_cpus']:.2f} used", "", unlimited, "")
    return [explain(result), Text("\n" + textwrap.indent(apply(result), "  ") + "\n"), t]
