"""``throttlelab reproduce``: the seed papers' experiments as data, run in the
simulator and set beside the numbers the papers report.

An experiment names a built-in scenario, its cases (``--set`` overrides, one row
each), the seeds, the columns it reports and, per row, the paper's figures with
their source. Every row is the mean over the seeds.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from statistics import mean, quantiles, stdev
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence

from throttlelab.runner import Runner
from throttlelab.scenarios import load_scenario_text
from throttlelab.synth import HCU_TASKS
from throttlelab.terminal import did_you_mean

if TYPE_CHECKING:
    from rich.console import Group

Output = dict[str, Any]
#: Column key -> value, computed from the outputs of one case: ``outputs[seed][variant]``.
Measure = Callable[["Case", Sequence[Sequence[Output]]], dict[str, float]]


class UnknownExperiment(LookupError):
    """The name is not one of :data:`EXPERIMENTS` (a user error: exit code 2)."""


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    fmt: str  # format spec for our value and the paper's
    #: False when the paper measured the same thing in another unit (then only
    #: ratios between rows compare); ``paper_unit`` names it.
    same_unit: bool = True
    paper_unit: str = ""


@dataclass(frozen=True)
class Case:
    """One row: a label, the overrides that make it, the paper's figures by column key,
    and the panel (a figure of its own in the paper, e.g. one period) it belongs to."""

    label: str
    sets: tuple[str, ...]
    paper: dict[str, float] = field(default_factory=dict)
    panel: str = ""
    #: A built-in scenario other than the experiment's, for this row only.
    scenario: str = ""


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    source: str  # where the paper's figures come from: authors, title, venue and year; table or figure
    scenario: str  # a built-in scenario
    columns: tuple[Column, ...]
    cases: tuple[Case, ...]
    measure: Measure
    seeds: tuple[int, ...] = (1, 2, 3)
    #: Runs per case and seed, each with these extra overrides (the measure pairs them up).
    variants: tuple[tuple[str, ...], ...] = ((),)
    note: str = ""
    #: What the rows vary, for a figure's x-axis (e.g. the period).
    axis: str = ""

    def runs(self, case: Case) -> list[list[list[str]]]:
        """The overrides of every run of ``case``, indexed ``[seed][variant]``."""
        return [[[*case.sets, *v, f"seed={s}"] for v in self.variants] for s in self.seeds]


def _mean_per_run(per_run: Callable[[Output], dict[str, float]]) -> Measure:
    """A measure that averages ``per_run`` over the seeds (one variant per seed)."""

    def measure(case: Case, outputs: Sequence[Sequence[Output]]) -> dict[str, float]:
        values = [per_run(runs[0]) for runs in outputs]
        return {key: mean(v[key] for v in values) for key in values[0]}

    return measure


# --- 000 (Ugedal et al.), Table II -----------------------------------------------

_UGEDAL_UNLIMITED_PERIOD_S = 0.1


def _ugedal_row(out: Output) -> dict[str, float]:
    cg = out["cgroups"]["sysbench"]
    limited = cg["nr_periods"] > 0
    return {
        # Unlimited, the kernel counts no periods: the paper's 734 is the run's
        # length in 100 ms periods, and so is ours.
        "periods": cg["nr_periods"] if limited else out["duration_s"] / _UGEDAL_UNLIMITED_PERIOD_S,
        "throttled": cg["nr_throttled"],
        "ratio_pct": 100 * cg["throttled_ratio"],
        "throttled_ms": cg["throttled_usec"] / 1e3,
    }


def _ugedal_case(period_ms: int, paper: tuple[float, float, float, float]) -> Case:
    sets = (f"cgroup.sysbench.period_us={period_ms * 1000}", f"cgroup.sysbench.quota_us={3 * period_ms * 1000}")
    return Case(f"{period_ms} ms", sets, dict(zip(("periods", "throttled", "ratio_pct", "throttled_ms"), paper)))


UGEDAL_TABLE2 = Experiment(
    name="ugedal-table2",
    axis="cpu.max period (quota = 3 CPUs)",
    title="sysbench, 3 threads on 3 CPUs, quota = 3 CPUs",
    source='Ugedal and Kumar, "Mitigating Unnecessary Throttling in Linux CFS Bandwidth Control", SBAC-PAD 2022, Table II (mean of 10 runs)',
    scenario="ugedal-table2",
    columns=(
        Column("periods", "nr_periods", ".0f"),
        Column("throttled", "nr_throttled", ".0f"),
        Column("ratio_pct", "throttled %", ".1f"),
        Column("throttled_ms", "throttled ms (all CPUs)", ".0f"),
    ),
    cases=(
        _ugedal_case(100, (735, 50, 6.8, 94)),
        _ugedal_case(50, (1486, 661, 45, 2457)),
        _ugedal_case(10, (7840, 3835, 49, 14608)),
        Case("unlimited", ("cgroup.sysbench.quota_us=-1",), dict(periods=734, throttled=0, ratio_pct=0, throttled_ms=0)),
    ),
    measure=_mean_per_run(_ugedal_row),
    note="unlimited: periods = run length / 100 ms (the kernel counts none).",
)


# --- 002 (Chiluk), fibtest ----------------------------------------------------------


def _fibtest_row(out: Output) -> dict[str, float]:
    cg = out["cgroups"]["fibtest"]
    work_ms = out["tasks"]["fast"]["work_usec"] / 1e3
    return {"usage_ms": cg["usage_usec"] / 1e3, "work": work_ms, "throttled": cg["nr_throttled"]}


#: The talk's limit as its runs imply: 10-11 throttled periods in 5 s (a spinner is
#: throttled in every period: a 500 ms period) at about 10 % of a CPU (50 ms of quota).
#: runfibtest writes 10 ms and leaves the period at its 100 ms default.
_FIBTEST_TALK_LIMIT = ("cgroup.fibtest.period_us=500000", "cgroup.fibtest.quota_us=50000")
_FIBTEST_SCRIPT_PANEL = "100 ms period"


def _fibtest_case(profile: str, threads: int, paper: tuple[float, ...] = (), talk: bool = True, cpus: int = 0) -> Case:
    """``threads`` threads on the built-in's 88 CPUs, or on a machine of ``cpus``,
    under the talk's limit or runfibtest's own (10 ms per 100 ms)."""
    sets = (f'kernel.profile="{profile}"', f"task.slow.threads={threads - 1}")
    label = f"{threads} thr"
    if cpus:
        sets += (f"machine.cpus={cpus}", f'task.slow.cpus="1-{cpus - 1}"')
        label += f" on {cpus} CPUs"
    panel = profile if talk else f"{profile}, {_FIBTEST_SCRIPT_PANEL}"
    limit = _FIBTEST_TALK_LIMIT if talk else ()
    return Case(label, sets + limit, dict(zip(("usage_ms", "work", "throttled"), paper)), panel=panel)


CHILUK_FIBTEST = Experiment(
    name="chiluk-fibtest",
    axis="fibtest threads (one panel per kernel and limit)",
    title="fibtest: 1 fast + n-1 slow threads pinned on 88 CPUs, 0.1 CPU of quota",
    source="Chiluk, 'Throttling: New Developments in Application Performance with CPU Limits', KubeCon NA 2019: 'Running Fibtest' (5.3.7 = 4.18 semantics) and 'Kernel 5.3.9' (5.4)",
    scenario="chiluk-fibtest",
    columns=(
        Column("usage_ms", "CPU usage ms", ".0f"),
        Column("work", "work ms", ".0f", same_unit=False, paper_unit="M iterations"),
        Column("throttled", "nr_throttled", ".0f"),
    ),
    cases=(
        _fibtest_case("4.18", 1, (539, 1452, 10)),
        _fibtest_case("4.18", 16, (530, 1380, 11)),
        _fibtest_case("4.18", 88, (183, 275, 11)),
        _fibtest_case("5.4", 1),
        _fibtest_case("5.4", 16),
        _fibtest_case("5.4", 88, (482, 1316, 10)),
        _fibtest_case("4.18", 1, talk=False),
        _fibtest_case("4.18", 16, talk=False),
        _fibtest_case("4.18", 88, talk=False),
        _fibtest_case("4.18", 1, (507, 1886, 51), talk=False, cpus=8),
        _fibtest_case("4.18", 8, (380, 1274, 52), talk=False, cpus=8),
    ),
    measure=_mean_per_run(_fibtest_row),
    note=(
        "work: ours = the fast thread's work in ms, the talk's = iterations completed (M); only ratios between rows "
        "of one machine compare. Another 88-thread run on 5.3.7: 137 ms, 213 M, 11 throttled. Rows 'on 8 CPUs': "
        "Chiluk's 8-CPU machine, 'Re: [PATCH v3 1/1] sched/fair: Fix low cpu usage with high throttling by "
        "removing expiration of cpu-local slices', LKML, 30 May 2019. "
        "The limit: the talk's runs were throttled 10-11 times in 5 s, which a spinner under a 100 ms period "
        "cannot be (it is throttled every period: 51 times in fibtest's README and on LKML), so the talk's group "
        "had a 500 ms period, and 539 ms in 5 s makes its quota 50 ms. Rows '4.18' and '5.4' use that limit (our "
        f"reading: the talk does not state it), rows '{_FIBTEST_SCRIPT_PANEL}' runfibtest's 10 ms per 100 ms. "
        "The mechanism (4.18, 512ac999 compares expires_seq): a slow CPU, waking every 10 ms, takes a 5 ms "
        "slice, returns all but min_cfs_rq_runtime (1 ms) and loses that 1 ms at its first charge after the "
        "period's end: 1 ms per slow CPU per period (the talk's 'IMPACT'). Spared are the CPUs that got runtime "
        "before the period timer's first refill: start_cfs_bandwidth adds (overrun + 1) periods to "
        "runtime_expires, overrun counting every period since the timer last ran, so that runtime expires "
        "minutes or days later. A quota spares at most about one slow CPU per ms of it: 50 ms spares all 15 of the "
        "16-thread run (the talk's 530 ms) and 45 of 87 at 88 threads (starved); 10 ms spares 5 of 7 on the "
        "8-CPU machine (LKML's 380 ms) and 5 of 15 at 16 threads, which starve there."
    ),
)


# --- 003 (Turner et al.), Fig. 6-8 ------------------------------------------------

_SOAKER_WARMUP_S = 1
_SOAKER_WINDOW_S = 5


def _soaker_measure(case: Case, outputs: Sequence[Sequence[Output]]) -> dict[str, float]:
    """The group's usage in CPUs over a window after a warm-up, and its deviation
    from the baseline's k CPUs. The window (a whole number of every period) leaves
    out the start, when the global pool is full before the first refill: the paper
    read /proc/stat once a second in a running system and never saw that edge."""
    cpus = mean(
        (end["cgroups"]["protag"]["usage_usec"] - start["cgroups"]["protag"]["usage_usec"]) / 1e6 / _SOAKER_WINDOW_S
        for start, end in outputs
    )
    baseline = case.paper["cpus"]
    return {"cpus": cpus, "deviation_pct": 100 * (cpus - baseline) / baseline}


TURNER_SOAKERS = Experiment(
    name="turner-soakers",
    axis="quota, k CPUs per period (one panel per period)",
    title="16 while(1) soakers on 16 CPUs, quota = k CPUs, periods 100/250/500 ms",
    source='Turner, Rao and Rao, "CPU bandwidth control for CFS", Linux Symposium 2009, Fig. 6-8: baseline = k CPUs by cpuset affinity',
    scenario="turner-soakers",
    columns=(Column("cpus", "CPUs", ".3f"), Column("deviation_pct", "deviation %", "+.2f")),
    cases=tuple(
        Case(
            f"k={k}",
            (f"cgroup.protag.period_us={period_ms * 1000}", f"cgroup.protag.quota_us={k * period_ms * 1000}"),
            {"cpus": k},
            panel=f"{period_ms} ms",
        )
        for period_ms in (100, 250, 500)
        for k in range(1, 17)
    ),
    measure=_soaker_measure,
    variants=((f"duration_s={_SOAKER_WARMUP_S}",), (f"duration_s={_SOAKER_WARMUP_S + _SOAKER_WINDOW_S}",)),
    note=(
        f"usage over {_SOAKER_WARMUP_S}-{_SOAKER_WARMUP_S + _SOAKER_WINDOW_S} s. The paper's text gives "
        "no numbers for Fig. 6-8, only that the average deviation from the baseline is "
        "'very small' and decreases as the period grows."
    ),
)

# --- 003 (Turner et al.), 5.1: CFS hard limits against the hybrid global pool ------

#: The hybrid global pool (5.2, 6) and CFS hard limits (5.1), each run to the end
#: of the warm-up and to the end of the window (the measure takes the difference).
_HARD_LIMITS_VARIANTS = tuple(
    (f"kernel.features={features}", f"duration_s={duration_s}")
    for features in ("[]", '["hard_limits"]')
    for duration_s in (_SOAKER_WARMUP_S, _SOAKER_WARMUP_S + _SOAKER_WINDOW_S)
)


def _limited_cgroup(out: Output) -> dict[str, Any]:
    """The scenario's one cgroup with a quota."""
    (cgroup,) = (c for c in out["cgroups"].values() if c["limit"]["quota_us"] is not None)
    return cgroup


def _bandwidth_window(start: Output, end: Output) -> dict[str, float]:
    """Between two runs of one seed: the limited group's usage in % of its quota,
    its throttled periods in %, and lock acquisitions per second."""
    a, b = _limited_cgroup(start), _limited_cgroup(end)
    quota_cpus = b["limit"]["quota_us"] / b["limit"]["period_us"]
    return {
        "usage_pct": 100 * (b["usage_usec"] - a["usage_usec"]) / 1e6 / _SOAKER_WINDOW_S / quota_cpus,
        "throttled_pct": 100 * (b["nr_throttled"] - a["nr_throttled"]) / (b["nr_periods"] - a["nr_periods"]),
        "locks_per_s": (end["engine"]["lock_acquisitions"] - start["engine"]["lock_acquisitions"]) / _SOAKER_WINDOW_S,
    }


def _hard_limits_measure(case: Case, outputs: Sequence[Sequence[Output]]) -> dict[str, float]:
    """Each mechanism's window (variants in _HARD_LIMITS_VARIANTS order), averaged over the seeds."""
    values = {}
    for i, mechanism in enumerate(("pool", "hard")):
        windows = [_bandwidth_window(runs[2 * i], runs[2 * i + 1]) for runs in outputs]
        values |= {f"{mechanism}_{key}": mean(w[key] for w in windows) for key in windows[0]}
    return values


def _soakers_case(threads: int, k: int) -> Case:
    """``threads`` soakers under k CPUs of quota per 100 ms on the 16 CPUs; with 16,
    Fig. 6's setting, where the paper's hybrid pool gives the group its k CPUs."""
    sets = (f"task.soaker.threads={threads}", f"cgroup.protag.quota_us={k * 100_000}")
    paper = {"pool_usage_pct": 100.0} if threads == 16 else {}
    return Case(f"{threads} thr, k={k}", sets, paper, panel="soakers")


def _fibtest_cpus_case(cpus: int) -> Case:
    """002's fibtest (1 fast thread, a slow one on each other CPU, 10 ms per 100 ms) on ``cpus`` CPUs."""
    sets = (f"machine.cpus={cpus}", f"task.slow.threads={cpus - 1}", f'task.slow.cpus="1-{cpus - 1}"')
    return Case(f"{cpus} CPUs", sets, panel="fibtest", scenario="chiluk-fibtest")


TURNER_HARD_LIMITS = Experiment(
    name="turner-hard-limits",
    axis="workload (soakers on 16 CPUs at 100 ms; fibtest's 1 fast + n-1 slow threads; sleepers under quota)",
    title="CFS hard limits (SCHED_RT-style local runtime and borrowing) beside the hybrid global pool",
    source='Turner, Rao and Rao, "CPU bandwidth control for CFS", Linux Symposium 2009, 5.1 (CFS hard limits, Fig. 2-3), 5.2 and 6 (the hybrid global pool)',
    scenario="turner-soakers",
    columns=(
        Column("pool_usage_pct", "pool % quota", ".1f"),
        Column("hard_usage_pct", "hard % quota", ".1f"),
        Column("pool_throttled_pct", "pool thr %", ".1f"),
        Column("hard_throttled_pct", "hard thr %", ".1f"),
        Column("pool_locks_per_s", "pool locks/s", ".0f"),
        Column("hard_locks_per_s", "hard locks/s", ".0f"),
    ),
    cases=(
        *(_soakers_case(16, k) for k in (1, 4, 8)),
        _soakers_case(1, 1),
        _soakers_case(4, 4),
        _fibtest_cpus_case(16),
        _fibtest_cpus_case(88),
        Case("64 thr", (), panel="sleepers", scenario="turner-sleepers"),
    ),
    measure=_hard_limits_measure,
    variants=_HARD_LIMITS_VARIANTS,
    note=(
        f"pool = the hybrid global pool (kernel.features=[]), hard = kernel.features=[\"hard_limits\"]; usage in % "
        f"of the quota, throttled periods (thr %) and lock acquisitions (cfs_b->lock, and the runqueue locks borrowing takes) over "
        f"{_SOAKER_WARMUP_S}-{_SOAKER_WARMUP_S + _SOAKER_WINDOW_S} s. The paper gives no numbers for 5.1: hard limits "
        "converge poorly when the quota is a small fraction of the machine, each borrowing taking every runqueue's "
        "lock for at most (n-1)/n more runtime, with a long tail of redistribution; 5.2 grants it that consumption "
        "within quota is very efficient (the sleepers: 64 threads of 2 ms per 100 ms, 1.28 CPUs spread evenly under 1.6 of quota, borrow nothing). The paper's "
        "figure here is Fig. 6's: the hybrid pool gives 16 soakers their k CPUs."
    ),
)


# --- 003 (Turner et al.), Fig. 9-11 and Table 1: against the cpuset baseline ------

#: 003's baseline, k CPUs by affinity without a quota, and bandwidth control, a
#: quota of k CPUs on all 16: each variant undoes half of a case's overrides
#: (:func:`_turner_case` sets both the quota and the cpuset).
_CPUSET_VS_BANDWIDTH = (("cgroup.protag.quota_us=-1",), ('cgroup.protag.cpus="0-15"',))


def _turner_case(k: int, period_ms: int, paper: dict[str, float], panel: str = "", *extra: str) -> Case:
    """k CPUs' worth of group protag: a quota of k periods and the cpuset 0..k-1."""
    sets = (
        f"cgroup.protag.period_us={period_ms * 1000}",
        f"cgroup.protag.quota_us={k * period_ms * 1000}",
        f'cgroup.protag.cpus="0-{k - 1}"',
        *extra,
    )
    return Case(f"k={k}", sets, paper, panel=panel)


#: The sysbench job in CPU seconds (16 threads' worth of 20 s), and the built-in's sample_ms.
_SYSBENCH_JOB_S = 320
_SYSBENCH_SAMPLE_S = 0.01


def _sysbench_case(k: int, period_ms: int) -> Case:
    """Run until the job is surely done: its ideal time on k CPUs and a tenth more."""
    return _turner_case(k, period_ms, {"time_ratio": 1.0}, f"{period_ms} ms", f"duration_s={1.1 * _SYSBENCH_JOB_S / k + 0.5:.2f}")


def _job_done_s(out: Output) -> float:
    """When the sysbench threads' CPU time together reaches the job's (sysbench's
    shared event count keeps every thread busy until then), interpolated within
    the sample."""
    done_us, job_us = 0.0, _SYSBENCH_JOB_S * 1e6
    for i, used_us in enumerate(out["tasks"]["sysbench"]["cpu_usec_series"]):
        if done_us + used_us >= job_us:
            return (i + (job_us - done_us) / used_us) * _SYSBENCH_SAMPLE_S
        done_us += used_us
    raise ValueError(f"the sysbench job did not finish in {out['duration_s']} s")


def _sysbench_measure(case: Case, outputs: Sequence[Sequence[Output]]) -> dict[str, float]:
    """The job's run time under the cpuset baseline and under bandwidth control."""
    cpuset_s, bandwidth_s = (mean(_job_done_s(runs[i]) for runs in outputs) for i in range(2))
    return {"cpuset_s": cpuset_s, "bandwidth_s": bandwidth_s, "time_ratio": bandwidth_s / cpuset_s}


TURNER_SYSBENCH = Experiment(
    name="turner-sysbench",
    axis="quota, k CPUs per period (one panel per period)",
    title="sysbench cpu, 16 threads on 16 CPUs, a fixed job: quota = k CPUs against a cpuset of k CPUs",
    source='Turner, Rao and Rao, "CPU bandwidth control for CFS", Linux Symposium 2009, Fig. 9-11: baseline = k CPUs by cpuset affinity',
    scenario="turner-sysbench",
    columns=(
        Column("cpuset_s", "cpuset s", ".2f"),
        Column("bandwidth_s", "bandwidth s", ".2f"),
        Column("time_ratio", "bandwidth / cpuset", ".3f"),
    ),
    cases=tuple(_sysbench_case(k, period_ms) for period_ms in (100, 250, 500) for k in range(1, 17)),
    measure=_sysbench_measure,
    seeds=(1,),
    variants=_CPUSET_VS_BANDWIDTH,
    note=(
        "The paper's text gives no numbers for Fig. 9-11, only that the deviation from the cpuset baseline is "
        "'very small in most cases' and improves as the period grows: its column is that baseline (1.000). The "
        f"job is {_SYSBENCH_JOB_S} s of CPU, scaled down, and done when the threads' CPU time together reaches it "
        "(sysbench's events come from one shared count)."
    ),
)

#: tbench's throughput is read over a window after a warm-up, as turner-soakers reads usage.
_TBENCH_WARMUP_S = 0.5
_TBENCH_WINDOW_S = 1.0
#: 003 Table 1, tbench 10 procs at a 100 ms period: MB/s with affinity to k CPUs and with a quota of k CPUs.
_TBENCH_TABLE1 = {1: (219.022, 213.415), 8: (1668.12, 1653.7), 16: (2451.82, 2421.36)}


def _tbench_measure(case: Case, outputs: Sequence[Sequence[Output]]) -> dict[str, float]:
    """Work done per second in the window, cpuset baseline and bandwidth control
    (variants: each of _CPUSET_VS_BANDWIDTH at the warm-up's end, then the window's)."""

    def rate(i: int) -> float:
        return mean(
            (runs[2 * i + 1]["tasks"]["tbench"]["work_usec"] - runs[2 * i]["tasks"]["tbench"]["work_usec"]) / 1e6 / _TBENCH_WINDOW_S
            for runs in outputs
        )

    cpuset, bandwidth = rate(0), rate(1)
    return {"cpuset": cpuset, "bandwidth": bandwidth, "ratio": bandwidth / cpuset}


TURNER_OVERHEAD = Experiment(
    name="turner-overhead",
    axis="quota, k CPUs (100 ms period)",
    title="tbench 10 procs on 16 CPUs: throughput with a quota of k CPUs against a cpuset of k CPUs",
    source='Turner, Rao and Rao, "CPU bandwidth control for CFS", Linux Symposium 2009, Table 1 (7.1): baseline = vanilla 2.6.34 with affinity masks',
    scenario="turner-tbench",
    columns=(
        Column("cpuset", "cpuset CPUs of work", ".3f", same_unit=False, paper_unit="MB/s"),
        Column("bandwidth", "bandwidth CPUs of work", ".3f", same_unit=False, paper_unit="MB/s"),
        Column("ratio", "bandwidth / cpuset", ".4f"),
    ),
    cases=tuple(
        _turner_case(k, 100, {"cpuset": cpuset, "bandwidth": bandwidth, "ratio": bandwidth / cpuset})
        for k, (cpuset, bandwidth) in _TBENCH_TABLE1.items()
    ),
    measure=_tbench_measure,
    seeds=(1,),
    variants=tuple(
        (*v, f"duration_s={d}") for v in _CPUSET_VS_BANDWIDTH for d in (_TBENCH_WARMUP_S, _TBENCH_WARMUP_S + _TBENCH_WINDOW_S)
    ),
    note=(
        f"work over {_TBENCH_WARMUP_S}-{_TBENCH_WARMUP_S + _TBENCH_WINDOW_S} s, in CPUs; the paper's is tbench's "
        "MB/s, which the simulator cannot measure (no network stack), so only the ratio compares. The "
        "simulator prices bandwidth control only where it touches the global pool (kernel.pool_lock_hold_ns: "
        "refills and slack returns), not the per-enqueue/dequeue bookkeeping 7.1 measures (the runtime "
        "accounting and throttle checks on every hierarchy level), which it takes as free."
    ),
)

# --- 000 (Ugedal et al.), Fig. 5-8: slush fund and no-op updates ---------------

_DESIGNS = ("[]", '["slush_fund"]', '["slush_fund", "noop_update"]')


def _mitigation_measure(case: Case, outputs: Sequence[Sequence[Output]]) -> dict[str, float]:
    """Throttled periods of Baseline, Slush and All, and All's execution time
    against Baseline's (variants in _DESIGNS order), averaged over the seeds."""
    ratio = [mean(100 * runs[i]["cgroups"]["sysbench"]["throttled_ratio"] for runs in outputs) for i in range(3)]
    time_s = [mean(runs[i]["tasks"]["sysbench"]["finished_s"] for runs in outputs) for i in range(3)]
    return {
        "baseline_pct": ratio[0], "slush_pct": ratio[1], "all_pct": ratio[2],
        "baseline_s": time_s[0], "all_s": time_s[2], "time_ratio": time_s[2] / time_s[0],
    }


def _mitigation_case(period_ms: int, paper: dict[str, float], scenario: str = "") -> Case:
    sets = (f"cgroup.sysbench.period_us={period_ms * 1000}", f"cgroup.sysbench.quota_us={3 * period_ms * 1000}")
    label = f"{period_ms} ms" + (", rewrites" if scenario else "")
    return Case(label, sets, paper, scenario=scenario)


UGEDAL_MITIGATIONS = Experiment(
    name="ugedal-mitigations",
    axis="cpu.max period",
    title="sysbench as in Table II: Baseline / Slush / All (slush + no-op updates)",
    source='Ugedal and Kumar, "Mitigating Unnecessary Throttling in Linux CFS Bandwidth Control", SBAC-PAD 2022, Fig. 5-6 (throttled periods) and 7-8 (execution time), V-A',
    scenario="ugedal-table2",
    columns=(
        Column("baseline_pct", "baseline %", ".1f"),
        Column("slush_pct", "slush %", ".2f"),
        Column("all_pct", "all %", ".2f"),
        Column("baseline_s", "baseline s", ".1f"),
        Column("all_s", "all s", ".1f"),
        Column("time_ratio", "all/baseline time", ".3f"),
    ),
    cases=(
        _mitigation_case(100, dict(baseline_pct=6.8, time_ratio=0.95)),
        _mitigation_case(10, dict(baseline_pct=49, time_ratio=0.88)),
        _mitigation_case(10, {}, scenario="ugedal-rewrites"),
    ),
    measure=_mitigation_measure,
    variants=tuple((f"kernel.features={d}",) for d in _DESIGNS),
    note=(
        "Slush = kernel.features=[\"slush_fund\"], All = slush_fund + noop_update. The paper gives Slush and All "
        "as 'eliminated' at 100 ms and 'below 1 %' at 10 ms, and All's time as about 5 % and 12 % below "
        "Baseline's. Without rewrites of cpu.max All equals Slush; the last row rewrites the same values "
        "every 37 ms (built-in ugedal-rewrites), which only the no-op update ignores."
    ),
)


# --- 000, Fig. 9: the cost of the global pool's lock ------------------------------

_POOLS = ("cgroup.bench.quota_us=-1", 'kernel.features=[]', 'kernel.features=["atomic_pool"]')


def _overhead_measure(case: Case, outputs: Sequence[Sequence[Output]]) -> dict[str, float]:
    """Execution times without bandwidth control, with the spinlock and with the
    atomic pool (variants in _POOLS order), and each as a multiple of the first."""
    t = [mean(runs[i]["tasks"]["sysbench"]["finished_s"] for runs in outputs) for i in range(3)]
    return {"none_ms": 1e3 * t[0], "spinlock_ms": 1e3 * t[1], "atomic_ms": 1e3 * t[2],
            "spinlock_x": t[1] / t[0], "atomic_x": t[2] / t[0]}


UGEDAL_OVERHEAD = Experiment(
    name="ugedal-overhead",
    axis="sched_cfs_bandwidth_slice_us",
    title="38 sysbench-threads-like threads, quota never reached: spinlock vs atomic pool",
    source='Ugedal and Kumar, "Mitigating Unnecessary Throttling in Linux CFS Bandwidth Control", SBAC-PAD 2022, Fig. 9 and V-B',
    scenario="ugedal-overhead",
    columns=(
        Column("none_ms", "no BW ms", ".1f"),
        Column("spinlock_ms", "spinlock ms", ".1f"),
        Column("atomic_ms", "atomic ms", ".1f"),
        Column("spinlock_x", "spinlock / none", ".2f"),
        Column("atomic_x", "atomic / none", ".2f"),
    ),
    cases=tuple(
        Case(label, (f"kernel.slice_us={slice_us}",), paper)
        for label, slice_us, paper in (
            ("5 ms slice", 5000, {}),
            ("1 ms slice", 1000, {}),
            ("1 us slice", 1, dict(spinlock_x=210 / 20, atomic_x=28 / 20)),
        )
    ),
    measure=_overhead_measure,
    variants=tuple((p,) for p in _POOLS),
    note=(
        "The paper runs 20 s without bandwidth control, 210 s with the spinlock and 28 s with the atomic "
        "pool at a 1 us slice, and about the same at 5 ms and 1 ms; our workload is scaled down, so the "
        "multiples of the no-bandwidth time compare."
    ),
)


# --- 001 (Hegde's RFC): interleaved period timers ---------------------------------

#: 1CG (the second group idle) and 2CG, each aligned and interleaved.
_INTERLEAVE_VARIANTS = (
    ("task.stress2.threads=0", "kernel.features=[]"),
    ("task.stress2.threads=0", 'kernel.features=["interleave_timers"]'),
    ("kernel.features=[]",),
    ('kernel.features=["interleave_timers"]',),
)
#: The built-in's work per thread (one group alone on one core: 218 s).
_INTERLEAVE_WORK_US = 109_000_000
#: Segall's reply: "put some variance on your period config if you want
#: variance": the second group's period, the first's staying at 100 ms.
_SEGALL_PERIODS_MS = (99, 97, 90, 75)


def _interleave_measure(case: Case, outputs: Sequence[Sequence[Output]]) -> dict[str, float]:
    """Finish times of 1CG and 2CG, aligned and interleaved (the variants in order)."""

    def finished(i: int) -> float:
        return mean(max(t["finished_s"] for t in runs[i]["tasks"].values() if t["threads"]) for runs in outputs)

    one, one_i, two, two_i = (finished(i) for i in range(4))
    return {"one_s": one, "one_i_s": one_i, "two_s": two, "two_i_s": two_i, "gain_pct": 100 * (two - two_i) / two}


def _interleave_case(cores: int, paper: Optional[tuple[float, float, float, float]], cg2_period_ms: int = 100) -> Case:
    """``cores`` SMT8 cores; each group gets 25 % of them and, as the RFC's times
    halving with the cores imply, 4 workers per core sharing the same total work.
    ``cg2_period_ms`` other than 100: Segall's alternative, the second group's
    period varied (its quota kept at 25 %)."""
    periods_ms = {1: 100, 2: cg2_period_ms}
    sets = (f"machine.cpus={8 * cores}",) + tuple(
        s
        for g in (1, 2)
        for s in (
            f"cgroup.cg{g}.period_us={1000 * periods_ms[g]}",
            f"cgroup.cg{g}.quota_us={2000 * periods_ms[g] * cores}",
            f"task.stress{g}.threads={4 * cores}",
            f"task.stress{g}.phases=[{{ run_us = {_INTERLEAVE_WORK_US // cores} }}]",
        )
    )
    label = f"{cores} core{'s' if cores > 1 else ''}"
    if cg2_period_ms != 100:
        return Case(f"{label}, 100 / {cg2_period_ms} ms", sets, panel="varied periods")
    one, one_i, two, two_i = paper
    gain = 100 * (two - two_i) / two
    return Case(label, sets, dict(one_s=one, one_i_s=one_i, two_s=two, two_i_s=two_i, gain_pct=gain))


HEGDE_INTERLEAVE = Experiment(
    name="hegde-interleave",
    axis="SMT8 cores per group",
    title="2 cgroups of 25 % each on SMT8 cores, stress-ng --cpu=4: aligned vs interleaved timers",
    source="Hegde, '[RFC PATCH] sched/fair: Interleave cfs bandwidth timers for improved single thread performance at low utilization', LKML 2023, and Segall's reply: the 1CG/2CG table (mean of its two runs)",
    scenario="hegde-interleave-2cg",
    columns=(
        Column("one_s", "1CG s", ".1f"),
        Column("one_i_s", "1CG interleaved s", ".1f"),
        Column("two_s", "2CG s", ".1f"),
        Column("two_i_s", "2CG interleaved s", ".1f"),
        Column("gain_pct", "2CG gain %", ".1f"),
    ),
    cases=(
        _interleave_case(1, (218.5, 219, 315, 260.5)),
        _interleave_case(2, (108.5, 109, 157.5, 125)),
        _interleave_case(4, (60.5, 62, 89.5, 70)),
        _interleave_case(8, (33, 33, 48, 37.5)),
        *(_interleave_case(1, None, period_ms) for period_ms in _SEGALL_PERIODS_MS),
        *(_interleave_case(4, None, period_ms) for period_ms in _SEGALL_PERIODS_MS),
    ),
    measure=_interleave_measure,
    variants=_INTERLEAVE_VARIANTS,
    note=(
        "stress-ng workers: 4 per core per group, the total work fixed. The RFC's patch interleaves 'by best "
        "effort' (offsets in tenths of the period); the feature spreads the timers evenly, so its 2CG gain is "
        "an upper bound of the patch's. Rows 'varied periods': Segall's alternative, the second group's period "
        "shortened (quota kept at 25 %); their 2CG time sits between the same cores' aligned and interleaved "
        "times, whatever the spread (the timers drift through every relative phase), and interleaving them "
        "changes nothing (it spreads timers of equal periods only)."
    ),
)

# --- 004 (Thiyyakat et al.), Fig. 8-9, Tables 4 and 6: critical tasks under CFS, shares, deadline ----

#: 004 logged each task's CPU usage every second.
_SAMPLE_MS = 1000
#: Table 4's intervals "towards the beginning of the runs" are not given in numbers;
#: these lie inside the trace's 2nd and 3rd windows, so that the trace's own steps
#: between windows do not count as unsteadiness.
_HCU_INTERVALS_S = ((310, 590), (610, 890))
_CPUS = 4


def _class_delays(out: Output) -> dict[str, float]:
    """Mean delay (response time beyond the trace's length) per task class; a task
    that did not finish counts as infinitely late."""
    delays: dict[str, list[float]] = {"critical": [], "background": []}
    for task in out["tasks"].values():
        delay = task["delay_s"]
        delays[task["class"]].append(float("inf") if delay is None else delay)
    return {f"{c}_s": mean(d) for c, d in delays.items()}


def _critical_bandwidth_pct(out: Output) -> list[float]:
    """The critical tasks' CPU use in each second, in % of the 4 CPUs (004 Fig. 1, 4)."""
    series = [t["cpu_usec_series"] for t in out["tasks"].values() if t["class"] == "critical"]
    return [100 * sum(us) / (_SAMPLE_MS * 1e3 * _CPUS) for us in zip(*series)]


def _hcu_row(out: Output) -> dict[str, float]:
    """Delays per class, the CPU time the critical tasks got (all they need), and the
    standard deviation of their bandwidth in Table 4's two intervals."""
    critical_cpu_s = sum(t["cpu_usec"] for t in out["tasks"].values() if t["class"] == "critical") / 1e6
    pct = _critical_bandwidth_pct(out)
    sds = {f"sd{i}_pct": stdev(pct[a:b]) for i, (a, b) in enumerate(_HCU_INTERVALS_S, 1)}
    return {**_class_delays(out), "critical_cpu_s": critical_cpu_s, **sds}


def _lcu_row(out: Output) -> dict[str, float]:
    """Delays per class and the quartiles of the critical bandwidth (Table 6)."""
    q1, median, q3 = quantiles(_critical_bandwidth_pct(out), n=4)
    return {**_class_delays(out), "q1_pct": q1, "median_pct": median, "q3_pct": q3}


#: CPU time the critical tasks need by 004 Table 1: mean rate x duration, summed.
_HCU_CRITICAL_CPU_S = sum(t.mean * t.duration_s for t in HCU_TASKS if t.label == "critical")
_SAMPLE = (f"sample_ms={_SAMPLE_MS}",)
#: 004 3.3's profiling stage, 1 s at every window, for every critical task.
_HCU_PROFILED = tuple(f"task.task{i}.profile_ms=1000" for i, t in enumerate(HCU_TASKS, 1) if t.label == "critical")

THIYYAKAT_HCU = Experiment(
    name="thiyyakat-hcu",
    axis="scheduling of the critical tasks",
    title="HCU workload on 4 CPUs (synthetic trace from Table 1): mean delay per task class, steadiness of the critical bandwidth",
    source='Thiyyakat, Kalambur and Sitaram, "Improving Resource Isolation of Critical Tasks in a Workload", JSSPP 2020, Fig. 8 and Table 4 (4-core physical machine)',
    scenario="thiyyakat-hcu-cfs",
    columns=(
        Column("critical_s", "critical delay s", ".1f"),
        Column("background_s", "background delay s", ".1f"),
        Column("critical_cpu_s", "critical CPU s", ".0f"),
        Column("sd1_pct", "SD interval 1 %", ".3f"),
        Column("sd2_pct", "SD interval 2 %", ".3f"),
    ),
    cases=(
        Case("CFS", _SAMPLE, {"critical_cpu_s": _HCU_CRITICAL_CPU_S}, scenario="thiyyakat-hcu-cfs"),
        Case(
            "cgroup 95 % shares", _SAMPLE, {"critical_cpu_s": _HCU_CRITICAL_CPU_S, "sd1_pct": 0.422, "sd2_pct": 1.745},
            scenario="thiyyakat-hcu-cgroup",
        ),
        Case(
            "deadline, trace rates", _SAMPLE,
            {"critical_cpu_s": _HCU_CRITICAL_CPU_S, "sd1_pct": 0.032, "sd2_pct": 0.044}, scenario="thiyyakat-hcu-deadline",
        ),
        Case(
            "deadline, profiled 1 s", (*_SAMPLE, *_HCU_PROFILED),
            {"critical_cpu_s": _HCU_CRITICAL_CPU_S, "sd1_pct": 0.032, "sd2_pct": 0.044}, scenario="thiyyakat-hcu-deadline",
        ),
    ),
    measure=_mean_per_run(_hcu_row),
    seeds=(1,),
    note=(
        "Fig. 8 has no numbers in its text; 004 reports critical delays 3-40x smaller under SCHED_DEADLINE than "
        "in the cgroup, on four servers. The trace is synthetic (throttlelab/synth.py); its critical CPU time is "
        "checked against Table 1's means x durations. The standard deviations are of the critical tasks' CPU use "
        "per second in % of the 4 CPUs, in two intervals of our choosing (the paper gives them only on a figure). "
        "The profiled row follows 004 3.3 under the kernel's rule that sched_setattr keeps the current CBS "
        "instance (docs/engine.md): stages that begin inside an instance under-measure, and the tasks fall behind."
    ),
)

_LCU_SCHEMES = (("CFS", "cfs"), ("cgroup 95 % shares", "cgroup"), ("deadline", "deadline"))
#: 004 Table 6 (32-core machine): quartiles of the critical bandwidth, cgroups / SCHED_DEADLINE.
_LCU_TABLE6 = {
    "cgroup": {"q1_pct": 36.282, "median_pct": 41.6143, "q3_pct": 44.246},
    "deadline": {"q1_pct": 36.317, "median_pct": 41.6641, "q3_pct": 44.283},
}

THIYYAKAT_LCU = Experiment(
    name="thiyyakat-lcu",
    axis="scheduling of the critical tasks",
    title="LCU workload on 4 CPUs (synthetic trace): mean delay per task class, critical bandwidth quartiles",
    source='Thiyyakat, Kalambur and Sitaram, "Improving Resource Isolation of Critical Tasks in a Workload", JSSPP 2020, Fig. 9 and Table 6',
    scenario="thiyyakat-lcu-cfs",
    columns=(
        Column("critical_s", "critical delay s", ".2f"),
        Column("background_s", "background delay s", ".2f"),
        Column("q1_pct", "critical Q1 %", ".1f"),
        Column("median_pct", "critical median %", ".1f"),
        Column("q3_pct", "critical Q3 %", ".1f"),
    ),
    cases=tuple(
        Case(label, _SAMPLE, _LCU_TABLE6.get(scheme, {}), scenario=f"thiyyakat-lcu-{scheme}")
        for label, scheme in _LCU_SCHEMES
    ),
    measure=_mean_per_run(_lcu_row),
    seeds=(1,),
    note=(
        "004 gives no per-task table for LCU; the synthetic trace (throttlelab/synth.py) is built from its "
        "description, with the critical tasks' mean rates chosen to sum to Table 6's median (1.66 of 4 cores), so "
        "the quartiles check the generator, not the scheduler. Fig. 9 has no numbers in its text: its delays are "
        "smaller than HCU's, and critical tasks wait longer than background ones. SCHED_DEADLINE's critical delay is "
        "not the smallest here: a window's new runtime applies only from the thread's next CBS instance (the kernel "
        "keeps the current one), the reservation is exactly the trace's rate, and the trace's fixed sleeps never let "
        "a thread catch up."
    ),
)

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        UGEDAL_TABLE2, CHILUK_FIBTEST, TURNER_SOAKERS, TURNER_HARD_LIMITS, TURNER_SYSBENCH, TURNER_OVERHEAD, UGEDAL_MITIGATIONS, UGEDAL_OVERHEAD, HEGDE_INTERLEAVE, THIYYAKAT_HCU, THIYYAKAT_LCU
    )
}


def get(name: str) -> Experiment:
    """The experiment called ``name``; UnknownExperiment names the close matches."""
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise UnknownExperiment(f"unknown experiment '{name}'; {did_you_mean(name, EXPERIMENTS, 'experiments')}") from None


def run_count(experiment: Experiment) -> int:
    return len(experiment.cases) * len(experiment.seeds) * len(experiment.variants)


def reproduce(experiment: Experiment, on_run: Callable[[], None] = lambda: None, runner: Optional[Runner] = None) -> dict[str, Any]:
    """Run every case of ``experiment`` (on ``runner``, default a local pool);
    calls ``on_run`` after each simulation.

    Returns ``{name, title, source, note, scenario, seeds, columns, rows}``; a row is
    ``{case, panel, overrides, values: {key: {ours, paper, ratio}}}`` with ``paper`` and
    ``ratio`` null where the paper gives no figure (``ratio`` also when it is 0).
    """
    return reproduce_all([experiment], on_run, runner)[0]


def reproduce_all(
    chosen: Sequence[Experiment], on_run: Callable[[], None] = lambda: None, runner: Optional[Runner] = None,
) -> list[dict[str, Any]]:
    """:func:`reproduce` of each experiment, their runs in one batch: the pool's
    workers do not wait at the end of one experiment for its last runs."""
    runs = []
    for experiment in chosen:
        for case in experiment.cases:
            text, _ = load_scenario_text(case.scenario or experiment.scenario)
            runs += [(text, sets) for per_seed in experiment.runs(case) for sets in per_seed]
    with nullcontext(runner) if runner else Runner() as pool:
        docs = iter(pool.run_many(runs, on_run))
    return [_document(experiment, docs) for experiment in chosen]


def _document(experiment: Experiment, docs: Iterator[Output]) -> dict[str, Any]:
    """:func:`reproduce`'s document, from the outputs of its runs, taken in order from ``docs``."""
    rows = []
    for case in experiment.cases:
        outputs = [[next(docs) for _ in per_seed] for per_seed in experiment.runs(case)]
        ours = experiment.measure(case, outputs)
        values = {}
        for col in experiment.columns:
            paper = case.paper.get(col.key)
            ratio = ours[col.key] / paper if paper else None
            values[col.key] = {"ours": ours[col.key], "paper": paper, "ratio": ratio}
        rows.append({"case": case.label, "panel": case.panel, "overrides": list(case.sets), "values": values})
    return {
        "name": experiment.name,
        "title": experiment.title,
        "source": experiment.source,
        "note": experiment.note,
        "axis": experiment.axis,
        "scenario": experiment.scenario,
        "seeds": list(experiment.seeds),
        "columns": [
            {"key": c.key, "header": c.header, "fmt": c.fmt, "same_unit": c.same_unit, "paper_unit": c.paper_unit}
            for c in experiment.columns
        ],
        "rows": rows,
    }


def cells(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of an experiment's table: per column our value, then the
    paper's and ours/paper (×) where the paper gives that column at all."""
    with_paper = [
        (col, any(row["values"][col["key"]]["paper"] is not None for row in doc["rows"])) for col in doc["columns"]
    ]
    header = ["case"]
    for col, paper in with_paper:
        header += [col["header"]] + (["paper", "×"] if paper else [])
    rows = []
    for row in doc["rows"]:
        line = [f"{row['panel']} {row['case']}".strip()]
        for col, paper in with_paper:
            v = row["values"][col["key"]]
            line.append(_fmt(v["ours"], col["fmt"]))
            if paper:
                line += [_fmt(v["paper"], col["fmt"]), _fmt(v["ratio"], ".2f")]
        rows.append(line)
    return header, rows


def caption(doc: dict[str, Any]) -> str:
    return f"paper: {doc['source']}; ×: ours/paper" + (f"\n{doc['note']}" if doc["note"] else "")


def render(doc: dict[str, Any]) -> Group:
    """One experiment as a rich table (see :func:`cells`) between its title and
    caption, which are not wrapped to the table's width."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    header, rows = cells(doc)
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    return Group(Text(f"{doc['name']}: {doc['title']}", style="bold"), table, Text(caption(doc) + "\n"))


def _fmt(value: Optional[float], spec: str) -> str:
    return "-" if value is None else format(value, spec)
