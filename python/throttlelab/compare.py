"""``throttlelab compare``: the same scenario on the host kernel and in the simulator.

The real backend runs N times; the simulator runs N seeds, seed i set up like
kernel run i by the core (``Host::scenario_overrides``: CONFIG_HZ, the profile of
the host's kernel release, and the background activity, work speed and tick
lateness the real backend's probe measured before that run). By default the
simulator draws its own start against the tick grid and its own period timer
phases, as a user predicting a limit must: the
comparison is of two distributions, the kernel's over runs and the simulator's
over seeds. ``paired`` (a diagnostic) instead starts simulator run i where
kernel run i started (`machine.uptime_s`) and puts each group's period timer
where kernel run i found it (`period_timer_offset_us`, read from tracefs).

Per cgroup metric the result holds both sides' mean, standard deviation and
range, and the verdict: whether the two samples could come from one
distribution (the Mann-Whitney U test, two-sided, at 5 %), beside the older
and stricter reading, whether the simulator's mean lies inside the kernel's
range. The test gives a verdict only where it can reject: with n runs against
m seeds its smallest two-sided p is 2 / C(n + m, n) (every value of one side
above every value of the other), 0.1 for 3 against 3, 0.008 for 5 against 5.
Below ``ALPHA`` the row says "differs" or "alike"; otherwise "too few runs to
tell", with that smallest p (one and the same value on both sides is alike
at any count: nothing to test).

Each kernel run waits ``settle_s`` first: the host is busy for a while after
the run before ends (traced: DAMON), and the probe and the next run would count
that as background.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Sequence

from throttlelab import _native
from throttlelab.metrics import BY_KEY, CGROUP_METRICS, limit
from throttlelab.runner import Run, Runner
from throttlelab.terminal import table
from throttlelab.worker import WORKER

if TYPE_CHECKING:
    from rich.console import RenderableType

#: cpu.stat metrics compared, in table order.
METRICS = tuple(m.key for m in CGROUP_METRICS)

#: The verdict's test and its level.
TEST = "Mann-Whitney U, two-sided"
ALPHA = 0.05
#: Kernel runs (and simulator seeds) by default: the fewest at which the test
#: can say "differs" at ``ALPHA`` (5 against 5: p down to 0.008; 4 against 4:
#: 0.029, with no margin for a tie).
DEFAULT_RUNS = 5
#: A row's verdicts.
ALIKE, DIFFERS, TOO_FEW = "alike", "differs", "too few runs to tell"

#: Seconds each kernel run waits for the host to settle. Traced on the
#: fidelity host: after a run, DAMON took about 50 ms of CPU in the next
#: 250 ms; the probe right after counted 31-34 preemptions per CPU
#: and second, 15-20 after a 1.5 s pause, and the group that throttles most
#: with background (2 spinners, 10 ms quota per 5 ms + 5 ms burst) throttled
#: 10-16 times in 400 periods back to back against 4-12 after a pause.
SETTLE_S = 1.0

#: Runs a scenario (text) on a kernel once per overrides list in ``runs``,
#: each after ``settle_s`` of quiet, and yields the output documents (JSON) in
#: order: the host's one by one (``host_runs``), a VM's all from one boot (``vm.runner``).
KernelRun = Callable[[str, Sequence[Sequence[str]], float], Iterable[str]]

@dataclass
class Stats:
    """Mean, sample standard deviation and range of one metric over runs."""

    mean: float
    sd: float
    lo: float
    hi: float

    @classmethod
    def of(cls, values: Sequence[float]) -> "Stats":
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        # statistics.mean is exact, then rounded once: fmean of five runs of
        # 399/400 gives 0.9975000000000002, above the range it comes from.
        return cls(statistics.mean(values), sd, min(values), max(values))


def mean_host(hosts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The first run's host, its background activity averaged over all runs
    (the duration per preemption weighted by the preemptions; their lengths'
    median, the median of the runs' medians, over the runs that had a
    preemption; their lengths, all runs' pooled), its work speed, that speed's spread run to run and its
    run/sleep fit (``wakeup_cost_us``, ``run_sleep_work_speed``) averaged,
    and the median of its ticks' lateness and its late ticks (the share
    averaged; lateness the median and together-share the mean over the runs
    that had some), where every run measured them;
    the start, the threads' starts and the timer offsets, which differ per run, are left out."""
    host = dict(hosts[0])
    for per_run in ("period_timer_offset_us", "uptime_s", "thread_starts"):
        host.pop(per_run, None)
    per_s = statistics.fmean(h["background_per_s"] for h in hosts)
    lost = sum(h["background_per_s"] * h["background_us"] for h in hosts)
    host["background_per_s"] = per_s
    host["background_us"] = lost / (per_s * len(hosts)) if per_s > 0 else 0.0
    medians = [h["background_p50_us"] for h in hosts if h.get("background_p50_us") is not None]
    host.pop("background_p50_us", None)
    if medians:
        host["background_p50_us"] = statistics.median(medians)
    # Every run's preemptions pooled, as one probe pools its CPUs'.
    host["background_lengths_us"] = _native.measured_background_lengths([us for h in hosts for us in h.get("background_lengths_us", [])])
    if not host["background_lengths_us"]:
        del host["background_lengths_us"]
    latencies = [h.get("tick_latency_us") for h in hosts]
    host.pop("tick_latency_us", None)
    if None not in latencies:
        host["tick_latency_us"] = statistics.median(latencies)
    # The work's speed, its spread, and the run/sleep fit (its cost per wake-up, its speed): each the mean.
    for averaged in ("work_speed", "work_speed_cv", "wakeup_cost_us", "run_sleep_work_speed"):
        values = [h.get(averaged) for h in hosts]
        host.pop(averaged, None)
        if None not in values:
            host[averaged] = statistics.fmean(values)
    host.pop("tick_late", None)
    late = [h.get("tick_late") for h in hosts]
    if late and None not in late:
        # Late ticks: their share averaged over the runs; how late and how often
        # together, over the runs that had some (the median, the mean).
        found = [t for t in late if t["share"] > 0] or late
        host["tick_late"] = {"share": statistics.fmean(t["share"] for t in late),
                             "late_us": statistics.median(t["late_us"] for t in found),
                             "together": statistics.fmean(t["together"] for t in found)}
    return host


def kernel_runs(
    text: str,
    overrides: Sequence[str] = (),
    runs: int = 3,
    step: Optional[Callable[[str], None]] = None,
    settle_s: float = SETTLE_S,
    on: Optional[KernelRun] = None,
) -> list[dict[str, Any]]:
    """Run scenario ``text`` ``runs`` times (seeds 1..runs) on the host (or
    ``on`` another kernel: ``vm.runner``), each after ``settle_s`` of quiet;
    ``step(label)`` after each run."""
    step = step or (lambda _label: None)
    kernel = []
    for i, out in enumerate((on or host_runs)(text, [[*overrides, f"seed={i + 1}"] for i in range(runs)], settle_s)):
        kernel.append(json.loads(out))
        step(f"kernel run {i + 1}")
    return kernel


def host_runs(text: str, runs: Sequence[Sequence[str]], settle_s: float) -> Iterator[str]:
    """The host's ``KernelRun``: the real backend, one run after another."""
    _native.real_preflight(text, list(runs[0]))  # refused now, not after the first settle
    for overrides in runs:
        time.sleep(settle_s)
        yield _native.real(text, list(overrides), WORKER)


def simulator_runs(
    text: str,
    kernel: Sequence[dict[str, Any]],
    overrides: Sequence[str] = (),
    paired: bool = False,
    step: Optional[Callable[[str], None]] = None,
    seeds: Optional[int] = None,
) -> list[dict[str, Any]]:
    """Simulator seeds 1..``seeds`` (default: one per kernel run), seed i set
    up like kernel run i (modulo the runs): the background, work speed and
    ticks its probe measured before it, so that the seeds spread as the
    host's state did run to run (a guest's work speed moves by a half); its
    own phases drawn. ``paired``: seed i also started, with its period
    timers, where kernel run i was (one seed per kernel run)."""
    hosts = [run["host"] for run in kernel]
    if not paired:
        hosts = [hosts[i % len(hosts)] for i in range(seeds or len(kernel))]
    runs = [Run(text, [*overrides, f"seed={i + 1}"], json.dumps(h), placed=paired) for i, h in enumerate(hosts)]
    with Runner() as runner:
        return runner.run_many(runs, lambda: (step or (lambda _label: None))("simulator"))


def smallest_p(n: int, m: int) -> float:
    """The smallest two-sided p of the exact Mann-Whitney U test of ``n``
    values against ``m``: both one-sided tails of U = 0, each 1 / C(n+m, n)."""
    return min(1.0, 2 / math.comb(n + m, n))


def verdict(kernel: Sequence[float], sim: Sequence[float]) -> str:
    """``ALIKE`` or ``DIFFERS`` by :func:`same_distribution`, or ``TOO_FEW``
    where the sample sizes cannot reach p < ``ALPHA`` (samples of one and the
    same value on both sides are alike)."""
    if len(set(kernel)) == 1 and set(kernel) == set(sim):
        return ALIKE
    if smallest_p(len(kernel), len(sim)) >= ALPHA:
        return TOO_FEW
    return ALIKE if same_distribution(kernel, sim) else DIFFERS


def same_distribution(kernel: Sequence[float], sim: Sequence[float]) -> bool:
    """Whether the simulator's values and the kernel's could come from one
    distribution: the U test does not reject it at ``ALPHA`` (samples that
    are one and the same value on both sides are)."""
    if len(set(kernel)) == 1 and set(kernel) == set(sim):
        return True
    from scipy.stats import mannwhitneyu  # half a second to import: not at every command's start

    return bool(mannwhitneyu(kernel, sim, alternative="two-sided").pvalue >= ALPHA)


def verdicts(kernel: Sequence[dict[str, Any]], sim: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per cgroup and metric: both sides' statistics, and the verdicts."""
    cgroups = {}
    for name in kernel[0]["cgroups"]:
        rows = {}
        for metric in METRICS:
            k_values = [float(d["cgroups"][name][metric]) for d in kernel]
            s_values = [float(d["cgroups"][name][metric]) for d in sim]
            k, s = Stats.of(k_values), Stats.of(s_values)
            rows[metric] = {
                "kernel": asdict(k),
                "sim": asdict(s),
                "verdict": verdict(k_values, s_values),
                "mean_in_range": k.lo <= s.mean <= k.hi,
            }
        cgroups[name] = rows
    return cgroups


def compare(
    text: str,
    overrides: Sequence[str] = (),
    runs: int = DEFAULT_RUNS,
    step: Optional[Callable[[str], None]] = None,
    settle_s: float = SETTLE_S,
    paired: bool = False,
    on: Optional[KernelRun] = None,
) -> dict[str, Any]:
    """Run scenario ``text`` ``runs`` times on the host (or ``on`` another
    kernel) and over ``runs`` seeds in the simulator (drawing its own phases
    unless ``paired``); ``step(label)`` after each run (progress)."""
    kernel = kernel_runs(text, overrides, runs, step, settle_s, on)
    sim = simulator_runs(text, kernel, overrides, paired, step)
    return {
        "scenario": kernel[0]["scenario"],
        "runs": runs,
        "host": mean_host([d["host"] for d in kernel]),
        "paired": paired,
        # Paired: whether every kernel run traced its period timers, and each simulator run got them.
        "timers_placed": paired and all("period_timer_offset_us" in run["host"] for run in kernel),
        "verdict": f"{TEST}, p >= {ALPHA}: the simulator's seeds and the kernel's runs could be one distribution",
        # The smallest p these sample sizes allow: at or above ALPHA, no row can differ.
        "smallest_p": smallest_p(len(kernel), len(sim)),
        "cgroups": verdicts(kernel, sim),
        "kernel_runs": kernel,
        "sim_runs": sim,
    }


def render(result: dict[str, Any]) -> list[RenderableType]:
    """The comparison as one table per cgroup: mean (sd) [range] on each side, and the verdict."""
    from rich.markup import escape

    host = result["host"]
    parts: list[RenderableType] = [
        f"[bold]{result['scenario']}[/bold]  {result['runs']} runs  host {host['release']}"
        f" HZ={host['hz']} cgroup {host['cgroup']}  simulator: profile {result['sim_runs'][0]['profile']},"
        f" the host's HZ and background ({host['background_per_s']:.1f}/s x {host['background_us']:.0f} us"
        + (f", median {host['background_p50_us']:.0f} us" if "background_p50_us" in host else "")
        + (f", ticks {host['tick_latency_us']:.0f} us late" if "tick_latency_us" in host else "")
        + (f", work at {host['work_speed']:.3f} of the calibration" if "work_speed" in host else "") + ");"
        + (" unpaired: each seed draws its own start and period timer phases" if not result["paired"]
           else " paired: each run started and its period timers placed as in its kernel run" if result["timers_placed"]
           else " paired: each run started as in its kernel run (period timers not traced)"),
        f"verdict: {result['verdict']}"
        + (f"; {result['runs']} runs against {len(result['sim_runs'])} seeds can reach p = {result['smallest_p']:.3g} at best,"
           f" so a row reads \"{TOO_FEW}\" unless both sides are one value (--runs {DEFAULT_RUNS} can tell)"
           if result["smallest_p"] >= ALPHA else ""),
    ]
    for name, rows in result["cgroups"].items():
        limit_text = limit(**result["kernel_runs"][0]["cgroups"][name]["limit"])
        t = table(escape(f"cgroup {name}, {limit_text}: mean (sd) [range]"), ("metric", "kernel", "simulator", "verdict"), left=("metric", "verdict"))
        for metric, row in rows.items():
            shown = BY_KEY[metric]
            cells = [_stats_cell(row[side], shown.scale) for side in ("kernel", "sim")]
            t.add_row(shown.header, *cells, "[red]differs[/red]" if row["verdict"] == DIFFERS else row["verdict"])
        parts.append(t)
    return parts


def _stats_cell(stats: dict[str, float], scale: float) -> str:
    m, sd, lo, hi = (stats[k] * scale for k in ("mean", "sd", "lo", "hi"))
    return f"{m:,.4g} ({sd:,.2g}) [{lo:,.4g}..{hi:,.4g}]"
