"""``throttlelab explain``: why a cgroup is throttled, in numbers from simulations.

Every claim is measured on ``seeds`` runs of the scenario (seeds 1..N), never
taken from a rule of thumb:

- the group's demand per period: the CPU time its threads (and its
  descendants') use in each period-long window of the same scenario and seed
  with the group's ``cpu.max`` set to ``max``, as a distribution against the
  quota. (Not what it ran plus its throttled time under the limit: a
  throttled runqueue counts on every CPU, busy or not, so that sum is the
  period times the CPUs whenever the group throttles at all);
- concurrency: how many of its threads are on CPUs at once, at the start of
  each period-long window, at the window's peak and at the peak of each burst
  (a stretch with at least one of them on a CPU), without the limit;
- what the mechanics contribute: counterfactual runs with one knob of the
  kernel changed (1 ms slices, CONFIG_HZ 1000, another release's profile,
  ``noop_update`` when the scenario rewrites ``cpu.max``);
- what each fix would change: a longer period at the same ratio, burst =
  quota, one thread fewer, 25 % and 50 % more quota, no limit.

The runs go through :class:`throttlelab.runner.Runner`; the traced ones (demand,
concurrency) through :func:`measure_periods`, which hands back per-window
series rather than traces.
"""

from __future__ import annotations

import contextlib
import json
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from throttlelab import _native, captured
from throttlelab.metrics import limit
from throttlelab.runner import Runner
from throttlelab.scenarios import PathArg
from throttlelab.terminal import did_you_mean, table
from throttlelab.timeline import TracedRun, end_ns, subtree

if TYPE_CHECKING:
    from rich.console import RenderableType

#: Seeds (1..N) unless --runs says otherwise.
DEFAULT_RUNS = 5
#: The slice of the "stranded slices" counterfactual: the kernel's smallest sensible
#: sched_cfs_bandwidth_slice_us (1 ms; less would make every CPU ask the global pool all the time).
SMALL_SLICE_US = 1000
#: The tick of the "overrun" counterfactual: the highest CONFIG_HZ.
FAST_HZ = 1000
#: Releases the "release" counterfactuals run the scenario under: every profile.
PROFILES = tuple(_native.profiles())
MAX_PERIOD_US = 1_000_000  # cpu.max's longest period
#: A change of the throttled ratio smaller than this (in ratio, 1 point) is "little".
NOTABLE = 0.01


class ExplainError(ValueError):
    """A cgroup that cannot be explained (a user error: exit code 2)."""


Step = Callable[[], None]


# --- the traced runs: per-window series ------------------------------------------


def measure_periods(text: str, overrides: Sequence[str], cgroup: str) -> dict[str, list[int]]:
    """One traced run of ``text`` (with ``overrides``): for each whole window of
    the cgroup's period from 0 on, ``ran_ns``, the CPU time of the cgroup's (and its
    descendants') threads, ``at_start`` the number of its threads on a CPU at
    the window's start and ``peak`` the most at once in it; and ``burst_peak``,
    the most at once in each burst (a stretch in which at least one of them is
    on a CPU, however it spans windows). One pass over the
    trace as it streams (a long run's trace never sits in memory: the number of
    the group's threads on CPUs, integrated over time). Module-level, so that a
    process pool can run it."""
    resolved = json.loads(_native.validate(text, list(overrides)))
    groups = {cg["name"]: cg for cg in resolved["cgroups"]}
    period_ns = groups[cgroup]["period_us"] * 1000
    # at_start is the level just after a window's first instant (the switches at that instant
    # count), so it is filled once time moves on: None until then.
    ran, at_start, peak = [0], [None], [0]
    state = {"level": 0, "t": 0, "next": period_ns}  # CPUs running the group; time integrated to; next window

    def advance(t_ns: int) -> None:
        level = state["level"]
        if at_start[-1] is None and t_ns > state["next"] - period_ns:
            at_start[-1] = level
        while t_ns >= state["next"]:
            ran[-1] += level * (state["next"] - state["t"])
            state["t"] = state["next"]
            state["next"] += period_ns
            ran.append(0), at_start.append(level if t_ns > state["t"] else None), peak.append(level)
        ran[-1] += level * (t_ns - state["t"])
        state["t"] = t_ns

    burst_peak: list[int] = []
    run = TracedRun(text, overrides)
    tgs: Optional[set[int]] = None
    on_cpu: dict[int, bool] = {}
    for _now_ns, chunk in run:
        tgs = subtree(chunk, groups, cgroup) if tgs is None else tgs
        for r in chunk["records"]:
            if r["kind"] != "switch" or r["cpu"] is None:
                continue
            advance(r["t_ns"])
            on = r["arg"] is not None and r["tg"] in tgs
            before = state["level"]
            state["level"] += on - on_cpu.get(r["cpu"], False)
            on_cpu[r["cpu"]] = on
            peak[-1] = max(peak[-1], state["level"])
            if before == 0 < state["level"]:
                burst_peak.append(state["level"])
            elif state["level"]:
                burst_peak[-1] = max(burst_peak[-1], state["level"])
    advance(end_ns(run.output()))
    # The last window starts at the end or is cut short by it: not a whole period, so it
    # would count as one of little demand (a capture of 10.00016 s has 101 windows, and
    # its mean demand read 1 % low). A run shorter than one period keeps its one window.
    if len(ran) > 1:
        del ran[-1], at_start[-1], peak[-1]
    at_start = [state["level"] if n is None else n for n in at_start]
    return {"ran_ns": ran, "at_start": at_start, "peak": peak, "burst_peak": burst_peak}


def demand_per_period_ns(text: str, overrides: Sequence[str], cgroup: str) -> list[int]:
    """The cgroup's demand in each period-long window: its threads' CPU time
    when the cgroup has no limit (the same scenario and seed, ``quota_us=-1``)."""
    return measure_periods(text, [*overrides, f"cgroup.{cgroup}.quota_us=-1"], cgroup)["ran_ns"]


# --- the counterfactuals -----------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One change to the scenario: ``overrides`` added to the user's."""

    key: str  # a stable name for --json
    label: str  # what a person reads
    overrides: tuple[str, ...]


def mechanics(resolved: dict[str, Any], cg: dict[str, Any]) -> list[Variant]:
    """The counterfactuals that switch one mechanism off or change it."""
    kernel, machine = resolved["kernel"], resolved["machine"]
    out = []
    if kernel["slice_us"] > SMALL_SLICE_US:
        out.append(Variant(
            "slice", f"slice_us {SMALL_SLICE_US} (now {kernel['slice_us']})", (f"kernel.slice_us={SMALL_SLICE_US}",),
        ))
    if machine["hz"] < FAST_HZ:
        out.append(Variant(
            "tick", f"CONFIG_HZ {FAST_HZ} (now {machine['hz']})", (f"machine.hz={FAST_HZ}",),
        ))
    for profile in PROFILES:
        if profile != kernel["profile"]:
            out.append(Variant(f"profile-{profile}", f"release {profile} (now {kernel['profile']})", (f"kernel.profile={profile}",)))
    if any(w["cgroup"] == cg["name"] for w in resolved["writes"]) and "noop_update" not in kernel["features"]:
        features = json.dumps([*kernel["features"], "noop_update"])
        out.append(Variant(
            "rewrites", "noop_update (identical rewrites do nothing)",
            (f"kernel.features={features}",),
        ))
    return out


def fixes(resolved: dict[str, Any], cg: dict[str, Any]) -> list[Variant]:
    """The changes a user can make to the limit or the workload."""
    name, quota, period, burst = cg["name"], cg["quota_us"], cg["period_us"], cg["burst_us"]
    key = f"cgroup.{name}"
    out = []
    for factor in (2, 5):
        if period * factor <= MAX_PERIOD_US:
            change = [f"{key}.period_us={period * factor}", f"{key}.quota_us={quota * factor}"]
            change += [f"{key}.burst_us={burst * factor}"] if burst else []
            out.append(Variant(f"period-x{factor}", f"period {period * factor / 1e3:g} ms, same ratio", tuple(change)))
    if burst < quota:
        out.append(Variant("burst", f"cpu.max.burst {quota} (= quota)", (f"{key}.burst_us={quota}",)))
    for task in resolved["tasks"]:
        if task["threads"] > 1 and task["cgroup"] in _names_under(resolved, name):
            out.append(Variant(
                f"threads-{task['name']}", f"task {task['name']}: {task['threads'] - 1} thread{'s' if task['threads'] > 2 else ''} (now {task['threads']})",
                (f"task.{task['name']}.threads={task['threads'] - 1}",),
            ))
    for more in (25, 50):
        q = quota + quota * more // 100
        out.append(Variant(f"quota+{more}", f"quota {q} (+{more} %)", (f"{key}.quota_us={q}",)))
    out.append(Variant("no-limit", "no limit (cpu.max max)", (f"{key}.quota_us=max",)))
    return out


def _names_under(resolved: dict[str, Any], name: str) -> set[str]:
    """Cgroup ``name`` and its descendants."""
    parents = {cg["name"]: cg["parent"] for cg in resolved["cgroups"]}

    def under(g: Optional[str]) -> bool:
        while g:
            if g == name:
                return True
            g = parents.get(g)
        return False

    return {g for g in parents if under(g)}


# --- putting it together -----------------------------------------------------------


def _rank(sorted_values: Sequence[int], p: float) -> int:
    """The nearest-rank ``p``-quantile (0 <= p < 1) of non-empty sorted values."""
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def _quantiles_us(values_ns: Sequence[int]) -> dict[str, float]:
    s = sorted(values_ns)
    if not s:
        return {"p50_us": 0.0, "p90_us": 0.0, "max_us": 0.0, "mean_us": 0.0}
    return {"p50_us": _rank(s, 0.5) / 1e3, "p90_us": _rank(s, 0.9) / 1e3, "max_us": s[-1] / 1e3,
            "mean_us": statistics.fmean(s) / 1e3}


def _int_quantiles(values: Sequence[int]) -> dict[str, int]:
    s = sorted(values) or [0]
    return {"p50": _rank(s, 0.5), "p90": _rank(s, 0.9), "max": s[-1]}


def _summary(docs: Sequence[dict[str, Any]], cgroup: str) -> dict[str, Any]:
    """Mean throttled ratio over the seeds' runs (and each), the worst p99 of services."""
    ratios = [doc["cgroups"][cgroup]["throttled_ratio"] for doc in docs]
    p99s = [t["latency_us"]["p99"] / 1e3 for doc in docs for t in doc["tasks"].values() if "latency_us" in t]
    out: dict[str, Any] = {"throttled_ratio": statistics.fmean(ratios), "throttled_ratio_per_seed": ratios}
    if p99s:
        out["p99_ms"] = statistics.fmean(p99s)
    return out


def _variants(resolved: dict[str, Any], cg: dict[str, Any]) -> list[Variant]:
    return mechanics(resolved, cg) + fixes(resolved, cg)


def pick_cgroup(resolved: dict[str, Any], cgroup: Optional[str]) -> Optional[str]:
    """The cgroup asked for (checked), or the only limited one; None: choose by throttling."""
    names = [cg["name"] for cg in resolved["cgroups"]]
    limited = [cg["name"] for cg in resolved["cgroups"] if cg["quota_us"] is not None]
    if cgroup is not None:
        if cgroup not in names:
            raise ExplainError(f"--cgroup {cgroup}: no such cgroup in {resolved['name']}; {did_you_mean(cgroup, names, 'cgroups')}")
        if cgroup not in limited:
            raise ExplainError(f"--cgroup {cgroup}: has no limit (cpu.max max), so it is never throttled")
        return cgroup
    if not limited:
        raise ExplainError(f"no cgroup of {resolved['name']} has a limit (quota_us), so none is throttled")
    return limited[0] if len(limited) == 1 else None


def explain_text(
    text: str,
    cgroup: Optional[str] = None,
    overrides: Sequence[str] = (),
    seeds: int = DEFAULT_RUNS,
    runner: Optional[Runner] = None,
    step: Optional[Step] = None,
    on_total: Optional[Callable[[int], None]] = None,
) -> dict[str, Any]:
    """Why ``cgroup`` of scenario ``text`` is throttled (or that it is not): the
    ``--json`` document. Every number is from runs with seeds 1..``seeds``."""
    overrides = list(overrides)
    resolved = json.loads(_native.validate(text, overrides))
    chosen = pick_cgroup(resolved, cgroup)
    seed_list = list(range(1, seeds + 1))
    limited = [c["name"] for c in resolved["cgroups"] if c["quota_us"] is not None]
    with contextlib.nullcontext(runner) if runner else Runner() as run:  # a runner given stays open
        per_seed = [[*overrides, f"seed={s}"] for s in seed_list]
        if on_total:
            on_total(len(seed_list) * (2 + max(len(_variants(resolved, c)) for c in resolved["cgroups"] if c["name"] in limited)))
        now_docs = run.run_many([(text, o) for o in per_seed], step)
        if chosen is None:  # several limited groups: the most throttled
            chosen = max(limited, key=lambda n: statistics.fmean(d["cgroups"][n]["throttled_ratio"] for d in now_docs))
        cg = next(c for c in resolved["cgroups"] if c["name"] == chosen)
        now = _summary(now_docs, chosen)
        throttled = any(r > 0 for r in now["throttled_ratio_per_seed"])
        runnable, skipped = [], {}
        for v in _variants(resolved, cg) if throttled else []:
            try:
                _native.validate(text, [*overrides, *v.overrides])
                runnable.append(v)
            except _native.ScenarioError as e:  # e.g. burst under a release before 5.14
                skipped[v.key] = str(e)
        if on_total:
            on_total(len(seed_list) * (2 + len(runnable)))
        free_runs = run.map(measure_periods, [(text, [*o, f"cgroup.{chosen}.quota_us=-1"], chosen) for o in per_seed], step)
        docs = run.run_many([(text, [*o, *v.overrides]) for v in runnable for o in per_seed], step)
    results = {v.key: _summary(docs[i * len(seed_list):(i + 1) * len(seed_list)], chosen) for i, v in enumerate(runnable)}

    quota_ns = cg["quota_us"] * 1000
    demand = [d for r in free_runs for d in r["ran_ns"]]
    threads = sum(t["threads"] for t in resolved["tasks"] if t["cgroup"] in _names_under(resolved, chosen))
    threads += sum(s["workers"] for s in resolved["services"] if s["cgroup"] in _names_under(resolved, chosen))

    def rows(vs: list[Variant]) -> list[dict[str, Any]]:
        return [{"key": v.key, "change": v.label, "overrides": list(v.overrides), **(
            results[v.key] if v.key in results else {"skipped": skipped[v.key]})} for v in vs]

    doc: dict[str, Any] = {
        "scenario": resolved["name"],
        "cgroup": chosen,
        "limit": {"quota_us": cg["quota_us"], "period_us": cg["period_us"], "burst_us": cg["burst_us"]},
        "profile": resolved["kernel"]["profile"],
        "seeds": seed_list,
        "runs": len(seed_list) * (2 + len(runnable)),
        "throttled": throttled,
        "now": now,
        "demand_per_period": {
            **_quantiles_us(demand),
            "periods": len(demand),
            "over_quota_ratio": sum(d > quota_ns for d in demand) / len(demand) if demand else 0.0,
            "over_quota_burst_ratio": sum(d > quota_ns + cg["burst_us"] * 1000 for d in demand) / len(demand) if demand else 0.0,
            # Within 1 % of the quota or over: where a tick's late charge or a stranded slice decides.
            "at_quota_ratio": sum(d >= 0.99 * quota_ns for d in demand) / len(demand) if demand else 0.0,
        },
        "concurrency": {
            "threads": threads,
            "at_period_start": _int_quantiles([n for r in free_runs for n in r["at_start"]]),
            "peak_per_period": _int_quantiles([n for r in free_runs for n in r["peak"]]),
            "bursts": sum(len(r["burst_peak"]) for r in free_runs),
            "peak_per_burst": _int_quantiles([n for r in free_runs for n in r["burst_peak"]]),
        },
        "mechanics": rows(mechanics(resolved, cg)) if throttled else [],
        "fixes": rows(fixes(resolved, cg)) if throttled else [],
    }
    measured = captured.at_limit(text)
    if measured:
        doc["capture"] = measured
    return doc


def explain(scenario: PathArg, cgroup: Optional[str] = None, seeds: int = DEFAULT_RUNS, *,
            set: Optional[Sequence[str]] = None) -> dict[str, Any]:
    """Why ``cgroup`` of ``scenario`` (a built-in name, a path, a capture or TOML
    text) is throttled: the ``explain --json`` document, from seeds 1..``seeds``."""
    from throttlelab import scenario_text

    return explain_text(scenario_text(scenario), cgroup, set or (), seeds)


# --- plain words -------------------------------------------------------------------


def _pct(ratio: float) -> str:
    return f"{100 * ratio:.1f} %"


def _ms(us: float) -> str:
    return f"{us / 1e3:.1f} ms"


def render(doc: dict[str, Any]) -> list[RenderableType]:
    """Sentences with numbers, then the mechanics and fixes tables."""
    lim, now, dem = doc["limit"], doc["now"], doc["demand_per_period"]
    n = len(doc["seeds"])
    quota_us, period_us = lim["quota_us"], lim["period_us"]
    name = doc["cgroup"]
    seeds = f"{n} seed{'s' if n != 1 else ''}"
    p99 = f", p99 latency {now['p99_ms']:.1f} ms" if "p99_ms" in now else ""
    lines: list[RenderableType] = []
    if not doc["throttled"]:
        lines.append(
            f"cgroup {name} ({limit(quota_us, period_us, lim['burst_us'])}) is not throttled in any of {seeds}{p99}."
        )
    else:
        lines.append(
            f"cgroup {name} ({limit(quota_us, period_us, lim['burst_us'])}) is throttled in {_pct(now['throttled_ratio'])}"
            f" of periods (nr_throttled / nr_periods, mean of {seeds}: {doc['runs']} simulations in all){p99}."
        )
    if "capture" in doc:
        cap = doc["capture"]
        lines.append(
            f"For comparison, the kernel throttled it in {_pct(cap['throttled_ratio'])} of periods over the capture"
            f" (nr_throttled {cap['nr_throttled']} of nr_periods {cap['nr_periods']}), where it used"
            f" {cap['usage_cpus']:.2f} CPUs at this limit: what it got, not what it asks for (the demand below)."
        )
    over = dem["over_quota_ratio"]
    mean_note = (
        f" The mean, {_ms(dem['mean_us'])}, is below the quota: the periods above it are what throttles."
        if dem["mean_us"] <= quota_us and over > 0 else
        f" No period asks for more, but {_pct(dem['at_quota_ratio'])} ask for at least 99 % of it: what throttles"
        " it is the mechanics below." if doc["throttled"] and over == 0 else ""
    )
    lines.append(
        f"Demand: without the limit its threads use p50 {_ms(dem['p50_us'])}, p90 {_ms(dem['p90_us'])}, max"
        f" {_ms(dem['max_us'])} of CPU per {_ms(period_us)} period, against a quota of {_ms(quota_us)};"
        f" {_pct(over)} of {dem['periods']} periods ask for more than the quota"
        + (f" ({_pct(dem['over_quota_burst_ratio'])} more than quota + burst)" if lim["burst_us"] else "")
        + f".{mean_note}"
    )
    conc = doc["concurrency"]
    peak, burst = conc["peak_per_period"], conc["peak_per_burst"]
    spend = (f" {peak['p50']} threads on CPUs spend the quota of {quota_us / period_us:.3g} CPUs in"
             f" {_ms(quota_us / peak['p50'])}." if peak["p50"] > 1 and doc["throttled"] else "")
    lines.append(
        f"Concurrency, without the limit: of its {conc['threads']} threads, up to {peak['p50']} are on CPUs at once in a"
        f" period (p50; max {peak['max']}), {conc['at_period_start']['p50']} at a period's start (p50; max"
        f" {conc['at_period_start']['max']}); its {conc['bursts']} bursts (stretches with one on a CPU, all seeds)"
        f" reach {burst['p50']} at once (p50; p90 {burst['p90']}).{spend}"
    )
    if not doc["throttled"]:
        return lines
    lines.append(_mechanics_sentence(doc["mechanics"], now))
    lines.append(_variants_table("what the mechanics contribute", doc["mechanics"], now))
    lines.append(_variants_table("fix -> throttled", doc["fixes"], now))
    tried = [f for f in doc["fixes"] if "throttled_ratio" in f and f["key"] != "no-limit"]
    if tried:
        least = min(f["throttled_ratio"] for f in tried)
        best = [f for f in tried if f["throttled_ratio"] - least < 0.001]  # within 0.1 point of the least
        lines.append(f"Of the fixes, {' and '.join(f['change'] for f in best)} throttle{'s' if len(best) == 1 else ''}"
                     f" least: {_pct(least)} of periods (now {_pct(now['throttled_ratio'])}).")
    skipped = [r for r in doc["mechanics"] + doc["fixes"] if "skipped" in r]
    if skipped:
        lines.append("Not run: " + "; ".join(f"{r['change']} ({r['skipped']})" for r in skipped) + ".")
    return lines


def _variants_table(title: str, rows: list[dict[str, Any]], now: dict[str, Any]) -> RenderableType:
    with_p99 = "p99_ms" in now
    cols = ["change", "throttled %", "vs now (points)", *(["p99 ms"] if with_p99 else [])]
    t = table(f"{title} (now {_pct(now['throttled_ratio'])}" + (f", p99 {now['p99_ms']:.1f} ms" if with_p99 else "") + ")",
              cols, left=("change",))
    for row in rows:
        if "skipped" in row:
            continue
        delta = 100 * (row["throttled_ratio"] - now["throttled_ratio"])
        t.add_row(row["change"], f"{100 * row['throttled_ratio']:.1f}", f"{delta:+.1f}",
                  *([f"{row['p99_ms']:.1f}"] if with_p99 and "p99_ms" in row else ([""] if with_p99 else [])))
    return t


#: What a mechanism's counterfactual measures, in the words of a sentence.
MECHANISMS = {
    "slice": "slices (runtime stranded on other CPUs)",
    "tick": "ticks (overrun charged late, carried into the next period)",
    "rewrites": "rewrites of cpu.max (each resets the pools and restarts the period)",
}


def _mechanics_sentence(rows: list[dict[str, Any]], now: dict[str, Any]) -> str:
    """Which counterfactuals move the throttled ratio by at least NOTABLE, which way, and which do not."""
    ran = [r for r in rows if "throttled_ratio" in r]
    moved = [r for r in ran if abs(r["throttled_ratio"] - now["throttled_ratio"]) >= NOTABLE]
    if not ran:
        return "Mechanics: no counterfactual applies to this scenario."
    if not moved:
        return (f"Mechanics: none of {len(ran)} counterfactual runs (slice, tick, release"
                + (", rewrites" if any(r["key"] == "rewrites" for r in ran) else "")
                + f") moves throttling by {100 * NOTABLE:g} point or more: the demand against the quota is the cause.")
    parts = []
    for r in moved:
        delta = 100 * (r["throttled_ratio"] - now["throttled_ratio"])
        if r["key"] in MECHANISMS:
            parts.append(f"{MECHANISMS[r['key']]}, {r['change']}: {_pct(r['throttled_ratio'])} ({delta:+.1f} points)")
    releases = [r for r in moved if r["key"].startswith("profile-")]
    if releases:
        parts.append("the release, " + ", ".join(
            f"{r['key'].removeprefix('profile-')}: {_pct(r['throttled_ratio'])}" for r in releases))
    return f"Mechanics, each changed alone (now {_pct(now['throttled_ratio'])}): " + "; ".join(parts) + "."
