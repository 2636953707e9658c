"""Measure the simulator against a kernel over a grid of scenarios and write
the table to docs/fidelity-grid.md (and the raw data to docs/fidelity-grid.json).

``--grid spinners`` (issue #3's, the default): 1 and 2 spinning threads; quota
of 1x, 1.5x and 2x a CPU; periods of 5, 10, 20, 50 and 100 ms. ``--grid
releases`` (issue #17's, run on every release): spinners and threads that run
6 ms and sleep 4 ms, 1, 2 and 4 of them on 2 CPUs; quota of 1x and 1.5x a CPU;
periods of 10 and 100 ms. Each configuration runs without burst and with a
burst of half the quota, --runs times on the kernel and over --seeds seeds in
the simulator (``throttlelab.compare``), twice: unpaired, the headline (each seed
draws its own start and period timer phases, as a user's prediction must), and
paired, a diagnostic (seed i starts, with its timer, where kernel run i did).
Needs root and a cpu controller.

    python scripts/fidelity_grid.py --runs 5 --duration-s 2

``--kernel 6.12`` (a release of Debian's or a bzImage, as ``throttlelab real
--kernel`` takes it) measures that kernel under QEMU instead of the host's (a
configuration's runs in one boot), and the simulator is set up like it (its
release's profile, its CONFIG_HZ and its measured background):

    python scripts/fidelity_grid.py --grid releases --runs 5 --kernel 6.12 --out docs/fidelity-releases-6.12.md

``--regrade docs/fidelity-grid.json`` measures nothing: it holds the current
simulator against the kernel runs a grid stored, so that a change to the
simulator is checked against kernel samples it was not tuned on. A row keeps
the median of its probes' preemption lengths (``background_p50_us``, the
simulator's log-normal lengths); a row measured before the probe had one
draws every preemption at the mean, and ``--mean-only`` grades every row so.

``--grid edge`` (issue #34's) samples the quota's edge: spinners whose demand
is the quota (1-4 threads on 2 CPUs, their demand min(threads, 2) CPUs;
periods 10, 20, 25, 30, 40, 50 and 100 ms) and threads that run 10 ms and
sleep 18.6 ms (longer than a 10 ms period) at demand / quota 0.8-1.25 (1, 2
and 4 threads; periods 10, 20, 50 and 100 ms), each without burst and with a
burst of the quota: 224 configurations. Its simulator runs twice, both
unpaired: the scenario alone (a new user's prediction: the defaults of
``[machine]``) and set up like the host (as ``compare`` does). It is measured
in holds: ``--resume`` keeps the rows the JSON already has and appends each
row as it finishes, ``--max-minutes`` starts no row after that long (the
spinner rows and those at demand / quota 0.95-1.1 first), and
``--kernel-only`` leaves the simulator out (``--regrade`` adds it, without root):

    tl-measure python scripts/fidelity_grid.py --grid edge --runs 5 --kernel-only --resume --max-minutes 10 --out docs/fidelity-edge.md
    python scripts/fidelity_grid.py --grid edge --regrade docs/fidelity-edge.json --out docs/fidelity-edge.md

``--only-differing GRID.json`` keeps only the configurations that a regraded
grid's rows grade "differs" set up like the host (its ``alike``): a fresh
sample of the rows that miss, written beside the old one, and the old one
regraded on the same rows:

    tl-measure python scripts/fidelity_grid.py --grid edge --runs 5 --kernel-only --max-minutes 7.5 --only-differing docs/fidelity-edge.json --out docs/fidelity-edge-fresh.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.progress import Progress

from throttlelab import vm
from throttlelab._native import ScenarioError, scenario_toml, validate
from throttlelab.compare import Stats, kernel_runs, mean_host, same_distribution, simulator_runs
from throttlelab.runner import Run, Runner

#: Each workload's phases: a spinner, and a thread that runs 6 ms and sleeps
#: 4 ms (0.6 of a CPU in bursts, which a short period sees and a long one averages).
WORKLOADS = {
    "spin": [{"run_us": 1_000_000_000}],
    "run6-sleep4": [{"run_us": 6000}, {"sleep_us": 4000}],
    # The edge grid's: issue #34's knife-edge thread, whose sleep outlasts a 10 ms period.
    "run10000-sleep18600": [{"run_us": 10000}, {"sleep_us": 18600}],
}


def scenario_text(config: dict, duration_s: float) -> str:
    """A configuration's scenario: its workload's threads in one group on 2 CPUs, for ``duration_s``."""
    c = config
    return scenario_toml(f"The fidelity grid's configuration {key(c)} (scripts/fidelity_grid.py).", {
        "name": f"fidelity-{c['workload']}-{c['threads']}t-{c['period_us']}-{c['quota_us']}-{c['burst_us']}",
        "duration_s": duration_s,
        "machine": {"cpus": 2, "hz": 250},
        "kernel": {"profile": "6.18"},
        "cgroup": [{"name": "app", "period_us": c["period_us"], "quota_us": c["quota_us"], "burst_us": c["burst_us"]}],
        "task": [{"name": c["workload"], "cgroup": "app", "threads": c["threads"], "phases": WORKLOADS[c["workload"]]}],
    })


@dataclass(frozen=True)
class Grid:
    """A grid's axes; every configuration also runs without burst and with half the quota."""

    workloads: tuple[str, ...]
    threads: tuple[int, ...]
    quota_factors: tuple[float, ...]  # the quota in CPUs
    periods_ms: tuple[int, ...]


#: Issue #3's spinners (the host's grid), and issue #17's, run on every release:
#: spinners and run/sleep threads, 1-4 threads on 2 CPUs, the kernel's shortest
#: sensible period and the default one.
GRIDS = {
    "spinners": Grid(("spin",), (1, 2), (1.0, 1.5, 2.0), (5, 10, 20, 50, 100)),
    "releases": Grid(("spin", "run6-sleep4"), (1, 2, 4), (1.0, 1.5), (10, 100)),
}


#: The edge grid's axes (issue #34): spinners at demand = quota, and run/sleep
#: threads at these ratios of demand to quota.
EDGE_CPUS = 2
EDGE_SPIN_THREADS = (1, 2, 3, 4)
EDGE_SPIN_PERIODS_MS = (10, 20, 25, 30, 40, 50, 100)
EDGE_RUN_SLEEP = "run10000-sleep18600"
EDGE_RUN_SLEEP_DUTY = 10.0 / 28.6
EDGE_RATIOS = (0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25)
EDGE_RUN_SLEEP_THREADS = (1, 2, 4)
EDGE_RUN_SLEEP_PERIODS_MS = (10, 20, 50, 100)
#: The rows measured first: where a limit is decided.
EDGE_FIRST = (0.95, 1.1)


def edge_configurations() -> list[dict]:
    """The edge grid's configurations, each without burst and with a burst of
    the quota; ``demand_ratio``: the group's demand over its quota (a
    spinner's demand is a CPU, at most the machine's CPUs in all)."""
    configs = []
    for threads, period_ms, burst in itertools.product(EDGE_SPIN_THREADS, EDGE_SPIN_PERIODS_MS, (False, True)):
        quota_us = min(threads, EDGE_CPUS) * period_ms * 1000
        configs.append(dict(workload="spin", threads=threads, period_us=period_ms * 1000, quota_us=quota_us,
                            burst_us=quota_us if burst else 0, demand_ratio=1.0))
    for ratio, threads, period_ms, burst in itertools.product(EDGE_RATIOS, EDGE_RUN_SLEEP_THREADS, EDGE_RUN_SLEEP_PERIODS_MS, (False, True)):
        quota_us = round(threads * EDGE_RUN_SLEEP_DUTY * period_ms * 1000 / ratio)
        configs.append(dict(workload=EDGE_RUN_SLEEP, threads=threads, period_us=period_ms * 1000, quota_us=quota_us,
                            burst_us=quota_us if burst else 0, demand_ratio=ratio))
    return configs


def measured_first(config: dict) -> int:
    """The order configurations are measured in: spinners, then run/sleep rows
    at demand / quota 0.95-1.1, then the rest."""
    if config["workload"] == "spin":
        return 0
    return 1 if EDGE_FIRST[0] <= config["demand_ratio"] <= EDGE_FIRST[1] else 2


def key(config: dict) -> tuple:
    """A configuration's identity, as a stored row has it."""
    return (config["workload"], config["threads"], config["period_us"], config["quota_us"], config["burst_us"])


def differing(configs: list[dict], path: Path) -> list[dict]:
    """The configurations (in ``configs``' order) that the regraded grid at
    ``path`` grades "differs" set up like the host; ValueError names what is wrong."""
    try:
        rows = json.loads(path.read_text())["rows"]
        wanted = {key(r) for r in rows if r["alike"] is False}
        if not all(isinstance(r["alike"], bool) for r in rows):
            raise TypeError("an 'alike' that is not true or false")
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"--only-differing {path}: {e}") from e
    except (KeyError, TypeError) as e:
        raise ValueError(f"--only-differing {path}: not a regraded grid (each row needs its configuration and "
                         f"its 'alike' verdict): {e!r}") from e
    kept = [c for c in configs if key(c) in wanted]
    if not kept:
        raise ValueError(f"--only-differing {path}: no configuration of this grid differs there")
    return kept


def configurations(grid: Grid):
    for workload, threads, factor, period_ms, burst in itertools.product(
            grid.workloads, grid.threads, grid.quota_factors, grid.periods_ms, (False, True)):
        period_us = period_ms * 1000
        quota_us = int(factor * period_us)
        yield dict(workload=workload, threads=threads, period_us=period_us, quota_us=quota_us,
                   burst_us=quota_us // 2 if burst else 0)


#: What the probe measured before each run, as a row keeps it per run.
RUN_HOST_KEYS = ("background_per_s", "background_us", "background_p50_us", "background_lengths_us", "work_speed", "work_speed_cv",
                 "tick_latency_us", "tick_late", "wakeup_cost_us", "run_sleep_work_speed")


def measured(kernel: list[dict]) -> dict:
    """What a configuration's kernel runs measured, as a grid row keeps it."""
    app = lambda metric: [d["cgroups"]["app"][metric] for d in kernel]  # noqa: E731
    host = mean_host([r["host"] for r in kernel])
    return {
        "kernel_ratio": app("throttled_ratio"),
        "kernel_throttled_ms": statistics.fmean(app("throttled_usec")) / 1e3,
        "kernel_usage_s": statistics.fmean(app("usage_usec")) / 1e6,
        "background_per_s": statistics.fmean(r["host"]["background_per_s"] for r in kernel),
        "background_us": statistics.fmean(r["host"]["background_us"] for r in kernel),
        "work_speed": host.get("work_speed"),
        "work_speed_cv": host.get("work_speed_cv"),
        "tick_latency_us": host.get("tick_latency_us"),
        "tick_late": host.get("tick_late"),
        # The probe's run/sleep fit: CPU per wake-up beyond the work, and that work's speed.
        "wakeup_cost_us": host.get("wakeup_cost_us"),
        "run_sleep_work_speed": host.get("run_sleep_work_speed"),
        # The median of the runs' preemption medians, as compare combines them (None before the probe measured one).
        "background_p50_us": host.get("background_p50_us"),
        # Every run's preemption lengths pooled, as compare pools them (none before probe12 kept them).
        "background_lengths_us": host.get("background_lengths_us"),
        "timer_offset_us": [r["host"].get("period_timer_offset_us", {}).get("app") for r in kernel],
        "uptime_s": [r["host"]["uptime_s"] for r in kernel],
        # Each run's threads: the CPU each first ran on at the start, and how late (none before start14's step 3).
        "thread_starts": [next(iter(r["host"].get("thread_starts", {}).values()), None) for r in kernel],
        # Periods between the controller's two cpu.stat reads: a spinner's group
        # counts every period, so fewer than duration / period says a read was late.
        "kernel_nr_periods": [r["cgroups"]["app"].get("nr_periods") for r in kernel],
        # Each run's own probe (the simulator's seeds spread over them, as compare's do).
        "run_hosts": [{k: r["host"][k] for k in RUN_HOST_KEYS if r["host"].get(k) is not None} for r in kernel],
        "kernel_usage_s_runs": [u / 1e6 for u in app("usage_usec")],
    }


def assumed_problem(overrides: list[str], regrade: Path | None) -> str | None:
    """Why an assumption for stored rows (``--work-speed-cv``, ``--tick-late``, ``--wakeup-cost-us``)
    cannot be taken, or None: it needs --regrade, and the core's validation of
    its ``machine`` keys holds their bounds."""
    if not regrade:
        return "needs --regrade"
    spinner = scenario_toml("", {"name": "spin", "duration_s": 1, "task": [{"name": "t", "phases": WORKLOADS["spin"]}]})
    try:
        validate(spinner, overrides)
    except ScenarioError as e:
        return str(e)
    return None


def stored_runs(host: dict, row: dict, *, median: bool = True, work_speed_cv: float | None = None,
                tick_late: dict | None = None, forget_tick_late: bool = False,
                wakeup_cost_us: float | None = None, lengths: bool = True) -> list[dict]:
    """A stored row's kernel runs, as far as the simulator's setup needs them:
    each run's host (the configuration's mean background and work speed, its
    start, its timer; a row from before the probe timed the work takes the
    grid's host's speed). The preemptions' median is the row's own: a row
    measured before the probe had one (or ``median`` False) draws every
    preemption at the mean, whatever the grid's host says. A row from before
    the probe measured the work's spread run to run takes ``work_speed_cv``
    (``--work-speed-cv``), or none; one from before it looked for late
    ticks, ``tick_late`` (``--tick-late``), or none; so does, with
    ``forget_tick_late`` (``--forget-tick-late``), a row whose probe predates
    probe11's count of late ticks (it has no ``wakeup_cost_us``); one from before it
    timed run/sleep work, ``wakeup_cost_us`` (``--wakeup-cost-us``), or none. A probe that kept the
    preemptions' lengths (probe12) gives them, drawn from in place of the log-normal, unless ``lengths``
    is False (``--lognormal-background``) or ``median`` is. A row that kept each
    run's probe (``run_hosts``) gives each run its own."""
    runs = []
    for i, (ratio, uptime_s, offset_us) in enumerate(zip(row["kernel_ratio"], row["uptime_s"], row["timer_offset_us"])):
        # What the probe measured: before this run, or the row's mean of them.
        probed = row["run_hosts"][i] if "run_hosts" in row else row
        run_host = {**host, "background_per_s": probed["background_per_s"], "background_us": probed["background_us"], "uptime_s": uptime_s}
        run_host.pop("background_p50_us", None)
        run_host.pop("work_speed_cv", None)
        if median and probed.get("background_p50_us") is not None:
            run_host["background_p50_us"] = probed["background_p50_us"]
        run_host.pop("background_lengths_us", None)
        if lengths and median and probed.get("background_lengths_us"):
            run_host["background_lengths_us"] = probed["background_lengths_us"]
        run_host.pop("tick_late", None)
        run_host.pop("wakeup_cost_us", None)
        if wakeup_cost_us is not None:
            run_host["wakeup_cost_us"] = wakeup_cost_us
        if work_speed_cv is not None:
            run_host["work_speed_cv"] = work_speed_cv
        if tick_late is not None:
            run_host["tick_late"] = tick_late
        # A probe that timed run/sleep work (cycle11) also counts late ticks as probe11 does.
        old_probe = probed.get("wakeup_cost_us") is None
        for measured_key in ("work_speed", "tick_latency_us", "work_speed_cv", "wakeup_cost_us") + (() if forget_tick_late and old_probe else ("tick_late",)):
            if probed.get(measured_key) is not None:
                run_host[measured_key] = probed[measured_key]
        if offset_us is not None:
            run_host["period_timer_offset_us"] = {"app": offset_us}
        runs.append({"host": run_host, "cgroups": {"app": {"throttled_ratio": ratio}}})
    return runs


def scenario_alone(text: str, seeds: int) -> list[dict]:
    """The simulator's seeds 1..``seeds`` on the scenario as it is: a user's
    prediction without ``--like-host`` (the quiet host of ``[machine]``'s defaults)."""
    with Runner() as runner:
        return runner.run_many([Run(text, [f"seed={i + 1}"]) for i in range(seeds)], lambda: None)


def edge_row(config: dict, kernel: dict, alone: list[dict], like_host: list[dict]) -> dict:
    """An edge grid row: what the kernel measured, and the simulator's seeds
    on the scenario alone and set up like the host (both unpaired)."""
    app = lambda docs, metric: [d["cgroups"]["app"][metric] for d in docs]  # noqa: E731
    sim_alone, sim = app(alone, "throttled_ratio"), app(like_host, "throttled_ratio")
    return {
        **config,
        **kernel,
        "sim_ratio_alone": sim_alone,
        "alike_alone": same_distribution(kernel["kernel_ratio"], sim_alone),
        "sim_throttled_ms_alone": statistics.fmean(app(alone, "throttled_usec")) / 1e3,
        "sim_ratio": sim,
        "alike": same_distribution(kernel["kernel_ratio"], sim),
        "sim_throttled_ms": statistics.fmean(app(like_host, "throttled_usec")) / 1e3,
        "sim_usage_s": statistics.fmean(app(like_host, "usage_usec")) / 1e6,
    }


def row(config: dict, kernel: dict, unpaired: list[dict], paired: list[dict]) -> dict:
    """A grid row: what the kernel measured, and the simulator's runs unpaired and paired."""
    app = lambda docs, metric: [d["cgroups"]["app"][metric] for d in docs]  # noqa: E731
    sim, sim_paired = app(unpaired, "throttled_ratio"), app(paired, "throttled_ratio")
    in_range = lambda xs: min(kernel["kernel_ratio"]) <= Stats.of(xs).mean <= max(kernel["kernel_ratio"])  # noqa: E731
    return {
        **config,
        **kernel,
        "sim_ratio": sim,
        "sim_ratio_paired": sim_paired,
        "alike": same_distribution(kernel["kernel_ratio"], sim),
        "mean_in_range": in_range(sim),
        "alike_paired": same_distribution(kernel["kernel_ratio"], sim_paired),
        "mean_in_range_paired": in_range(sim_paired),
        "sim_throttled_ms": statistics.fmean(app(unpaired, "throttled_usec")) / 1e3,
        "sim_usage_s": statistics.fmean(app(unpaired, "usage_usec")) / 1e6,
    }


#: What a grid row keeps of the kernel's runs (`measured`).
KERNEL_KEYS = ("kernel_ratio", "kernel_throttled_ms", "kernel_usage_s", "background_per_s", "background_us", "background_p50_us",
               "background_lengths_us",
               "work_speed", "work_speed_cv", "tick_latency_us", "tick_late", "wakeup_cost_us", "run_sleep_work_speed",
               "timer_offset_us", "uptime_s", "thread_starts", "kernel_nr_periods", "run_hosts", "kernel_usage_s_runs")


def markdown(rows: list[dict], runs: int, seeds: int, duration_s: float, host: dict, regraded: Path | None,
             kernel: str | None, grid: str) -> str:
    count = lambda key: sum(r[key] for r in rows)  # noqa: E731
    where = f" in a VM ({host['vm']['kernel']} under QEMU with {host['vm']['accel'].upper()})" if "vm" in host else ""
    lines = [
        f"Host {host['release']}{where}, HZ={host['hz']}, cgroup {host['cgroup']}; {runs} kernel runs and "
        f"{seeds} simulator seeds ({runs} paired) of {duration_s:g} s per configuration "
        + (f"(the kernel runs of an earlier grid, held against this simulator: `python scripts/fidelity_grid.py --regrade "
           f"{regraded} --seeds {seeds} --out {regraded.with_suffix('.md')}`)." if regraded else
           f"(`python scripts/fidelity_grid.py --grid {grid} --runs {runs} --seeds {seeds} --duration-s {duration_s:g}"
           + (f" --kernel {kernel}" if kernel else "") + "`)."),
        f"**Unpaired** (each seed draws its own start and period timer phases): the simulator's throttled ratios and "
        f"the kernel's could be one distribution (Mann-Whitney U, two-sided, 5 %) in {count('alike')} of {len(rows)} "
        f"configurations; the simulator's mean lies inside the kernel's range in {count('mean_in_range')}.",
        f"Paired (a diagnostic: seed i starts, and puts its period timer, where kernel run i did): "
        f"{count('alike_paired')} alike, mean inside the range in {count('mean_in_range_paired')}.",
        "The simulator's background activity is what the probe measured before each configuration's kernel runs: "
        f"{min(r['background_per_s'] for r in rows):.0f}-{max(r['background_per_s'] for r in rows):.0f} preemptions "
        f"per CPU and second of {min(r['background_us'] for r in rows):.0f}-{max(r['background_us'] for r in rows):.0f} us each"
        + (f"; the calibrated work ran at {min(speeds):.3f}-{max(speeds):.3f} of its calibration (`machine.work_speed`)."
           if (speeds := [r["work_speed"] for r in rows if r.get("work_speed") is not None]) else "."),
        "",
        "| workload | threads | period | quota | burst | kernel throttled % (runs) | sim unpaired (seeds) | verdict | mean in range | sim paired (seeds) | paired verdict | kernel / sim throttled ms | kernel / sim usage s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    pct = lambda xs: f"{100 * statistics.fmean(xs):.1f} ({' '.join(f'{100 * x:.0f}' for x in xs)})"  # noqa: E731
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['threads']} | {r['period_us'] // 1000} ms | {r['quota_us'] / 1000:g} ms | {r['burst_us'] / 1000:g} ms "
            f"| {pct(r['kernel_ratio'])} | {pct(r['sim_ratio'])} "
            f"| {'alike' if r['alike'] else 'differs'} | {'yes' if r['mean_in_range'] else 'no'} "
            f"| {pct(r['sim_ratio_paired'])} | {'alike' if r['alike_paired'] else 'differs'} "
            f"| {r['kernel_throttled_ms']:.0f} / {r['sim_throttled_ms']:.0f} "
            f"| {r['kernel_usage_s']:.2f} / {r['sim_usage_s']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def edge_markdown(rows: list[dict], runs: int, seeds: int, duration_s: float, host: dict, total: int,
                  only_differing: Path | None = None) -> str:
    """The edge grid's table (rows in the grid's order), with both columns' counts
    over every measured row, the spinners and the rows at demand / quota 0.95-1.1."""
    def counts(subset: list[dict]) -> str:
        n = len(subset)
        return (f"{sum(r['alike'] for r in subset)} of {n} alike set up like the host, "
                f"{sum(r['alike_alone'] for r in subset)} of {n} on the scenario alone")
    spinners = [r for r in rows if r["workload"] == "spin"]
    run_sleep = [r for r in rows if r["workload"] != "spin"]
    where = f" in a VM ({host['vm']['kernel']} under QEMU with {host['vm']['accel'].upper()})" if "vm" in host else ""
    lines = [
        f"Host {host['release']}{where}, HZ={host['hz']}, cgroup {host['cgroup']}, {EDGE_CPUS} CPUs; {runs} kernel runs of "
        f"{duration_s:g} s against {seeds} simulator seeds per configuration, unpaired (Mann-Whitney U, two-sided, 5 %, "
        f"as `compare` does); {len(rows)} of the {total} configurations measured"
        + (f", those `{only_differing}` grades differing set up like the host" if only_differing else "")
        + f" (`python scripts/fidelity_grid.py --grid edge --runs {runs} --duration-s {duration_s:g} --kernel-only "
        + (f"--only-differing {only_differing}" if only_differing else "--resume") + "`, "
        f"then `--regrade` with `--seeds {seeds}`).",
        "",
        f"- all measured rows: {counts(rows)};",
        f"- spinners at demand = quota: {counts(spinners)};",
        f"- run/sleep at demand / quota {', '.join(f'{x:g}' for x in sorted({r['demand_ratio'] for r in run_sleep}))}: "
        f"{counts(run_sleep)};",
        *(f"  - {n} thread{'s' * (n > 1)}: {counts([r for r in run_sleep if r['threads'] == n])};"
          for n in sorted({r["threads"] for r in run_sleep})),
        "",
        "*Alone*: the scenario as a user writes it ([machine]'s defaults: 2 preemptions a second of 20 us). *Like host*: "
        "set up as `compare` sets it (the probe's background, work speed and tick lateness before each configuration's runs: "
        + (f"{min(r['background_per_s'] for r in rows):.0f}-{max(r['background_per_s'] for r in rows):.0f} preemptions "
           f"per CPU-second of {min(r['background_us'] for r in rows):.0f}-{max(r['background_us'] for r in rows):.0f} us)." if rows else ").")
        + " A run/sleep thread runs 10 ms and sleeps 18.6 ms; a spinner's demand is a CPU, at most 2 in all.",
        "",
        "| workload | threads | period | quota | burst | demand / quota | kernel throttled % (runs) | alone (seeds) | alone | like host (seeds) | like host | kernel / alone / like-host throttled ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    pct = lambda xs: f"{100 * statistics.fmean(xs):.1f} ({' '.join(f'{100 * x:.0f}' for x in xs)})"  # noqa: E731
    verdict = lambda alike: "alike" if alike else "**differs**"  # noqa: E731
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['threads']} | {r['period_us'] // 1000} ms | {r['quota_us'] / 1000:g} ms | {r['burst_us'] / 1000:g} ms "
            f"| {r['demand_ratio']:g} | {pct(r['kernel_ratio'])} | {pct(r['sim_ratio_alone'])} | {verdict(r['alike_alone'])} "
            f"| {pct(r['sim_ratio'])} | {verdict(r['alike'])} "
            f"| {r['kernel_throttled_ms']:.0f} / {r['sim_throttled_ms_alone']:.0f} / {r['sim_throttled_ms']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def save(path: Path, doc: dict) -> None:
    """Write ``doc`` as JSON through a new file renamed into place: a grid
    killed mid-write keeps its last rows."""
    staged = path.with_suffix(".json.tmp")
    staged.write_text(json.dumps(doc, indent=1))
    os.replace(staged, path)


def measure(configs: list[dict], args: argparse.Namespace, on, stored: dict | None) -> dict:
    """Run the kernel on every configuration the stored grid lacks (in the
    grid's measuring order), saving the JSON after each; none is started after
    ``--max-minutes``. Returns the grid: the host and the rows measured."""
    doc = {"host": stored["host"], "rows": list(stored["rows"])} if stored else {"host": None, "rows": []}
    done = {key(r) for r in doc["rows"]}
    todo = [c for c in configs if key(c) not in done]
    if args.grid == "edge":
        todo.sort(key=measured_first)
    deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None
    json_path = args.out.with_suffix(".json")
    with Progress(transient=True) as progress:
        bar = progress.add_task("kernel runs", total=len(todo))
        for config in todo:
            if deadline is not None and time.monotonic() > deadline:
                break
            text = scenario_text(config, args.duration_s)
            kernel = kernel_runs(text, runs=args.runs, on=on)
            doc["host"] = doc["host"] or kernel[0]["host"]
            doc["rows"].append({**config, **measured(kernel)})
            save(json_path, doc)
            progress.advance(bar)
    left = len([c for c in configs if key(c) not in {key(r) for r in doc["rows"]}])
    print(f"{len(doc['rows'])} of {len(configs)} configurations measured, {left} left: {json_path}")
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration-s", type=float, default=2.0)
    parser.add_argument("--grid", choices=[*GRIDS, "edge"], default="spinners", help="Issue #3's spinners, the grid run on every release, or issue #34's edge.")
    parser.add_argument("--seeds", type=int, default=20, help="Simulator seeds per configuration, unpaired.")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "fidelity-grid.md")
    parser.add_argument(
        "--regrade",
        type=Path,
        metavar="GRID.json",
        help="Measure nothing: hold the current simulator against a stored grid's kernel runs (needs no root).",
    )
    parser.add_argument("--resume", action="store_true", help="Keep the rows --out's JSON has; measure the rest.")
    parser.add_argument("--max-minutes", type=float, help="Start no configuration's kernel runs after this long.")
    parser.add_argument("--kernel-only", action="store_true", help="Measure the kernel only; --regrade adds the simulator.")
    parser.add_argument("--only-differing", type=Path, metavar="GRID.json",
                        help="Only the configurations this regraded grid grades 'differs' set up like the host.")
    parser.add_argument("--mean-only", action="store_true",
                        help="With --regrade: every background preemption at the mean, the rows' measured median left out.")
    parser.add_argument("--lognormal-background", action="store_true",
                        help="With --regrade: draw the background's lengths from the log-normal of the rows' median and "
                             "mean, leaving out the lengths the probe kept (probe12 on).")
    parser.add_argument("--work-speed-cv", type=float, metavar="CV",
                        help="With --regrade: the work's spread run to run (machine.work_speed_cv) for rows whose probe "
                             "did not measure it (measured before it existed).")
    parser.add_argument("--tick-late", metavar="SHARE,LATE_US,TOGETHER",
                        help="With --regrade: the late ticks (host.tick_late, machine.tick_late_*) for rows whose probe "
                             "did not look for them (measured before it did).")
    parser.add_argument("--forget-tick-late", action="store_true",
                        help="With --regrade: leave out the late ticks (host.tick_late) of rows whose probe is from before "
                             "probe11 (no host.wakeup_cost_us), which took a wake-up's or a preemption's charge of its "
                             "spinner for a late tick (docs/fidelity.md); --tick-late, if given, stands in.")
    parser.add_argument("--wakeup-cost-us", type=float, metavar="US",
                        help="With --regrade: the CPU a wake-up costs beyond its work (host.wakeup_cost_us, "
                             "machine.wakeup_cost_us) for rows whose probe did not time run/sleep work (measured before it did).")
    parser.add_argument("--kernel", metavar="RELEASE|PATH", help="Measure this kernel under QEMU instead of the host's.")
    parser.add_argument("--accel", choices=vm.ACCELS, default="auto")
    parser.add_argument("--cgroup", choices=vm.CGROUP_VERSIONS, default="v2", help="With --kernel: the guest's hierarchy.")
    args = parser.parse_args()
    configs = edge_configurations() if args.grid == "edge" else list(configurations(GRIDS[args.grid]))
    if args.only_differing:
        try:
            configs = differing(configs, args.only_differing)
        except ValueError as e:
            print(f"fidelity_grid.py: error: {e}", file=sys.stderr)
            sys.exit(2)
    if args.work_speed_cv is not None and (problem := assumed_problem([f"machine.work_speed_cv={args.work_speed_cv}"], args.regrade)):
        print(f"fidelity_grid.py: error: --work-speed-cv {args.work_speed_cv}: {problem}", file=sys.stderr)
        sys.exit(2)
    if args.wakeup_cost_us is not None and (problem := assumed_problem([f"machine.wakeup_cost_us={args.wakeup_cost_us}"], args.regrade)):
        print(f"fidelity_grid.py: error: --wakeup-cost-us {args.wakeup_cost_us}: {problem}", file=sys.stderr)
        sys.exit(2)
    tick_late = None
    if args.tick_late is not None:
        try:
            share, late_us, together = (float(x) for x in args.tick_late.split(","))
            problem = assumed_problem([f"machine.tick_late_share={share}", f"machine.tick_late_us={late_us}",
                                       f"machine.tick_late_together={together}"], args.regrade)
        except ValueError:
            problem = "not SHARE,LATE_US,TOGETHER (three numbers)"
        if problem:
            print(f"fidelity_grid.py: error: --tick-late {args.tick_late}: {problem}", file=sys.stderr)
            sys.exit(2)
        tick_late = {"share": share, "late_us": late_us, "together": together}
    if args.regrade:
        stored = json.loads(args.regrade.read_text())
    else:
        json_path = args.out.with_suffix(".json")
        on = vm.runner(vm.kernel(args.kernel, print), args.accel, args.cgroup) if args.kernel else None
        stored = measure(configs, args, on, json.loads(json_path.read_text()) if args.resume and json_path.exists() else None)
        if args.kernel_only:
            return
    host, by_key = stored["host"], {key(r): r for r in stored["rows"]}
    if args.grid != "edge" and not args.only_differing:
        assert [key(c) for c in configs] == [key(r) for r in stored["rows"]], "a grid of other configurations"
    rows = []
    with Progress(transient=True) as progress:
        measured_configs = [c for c in configs if key(c) in by_key]
        bar = progress.add_task("simulator", total=len(measured_configs))
        for config in measured_configs:
            text = scenario_text(config, args.duration_s)
            stored_row = by_key[key(config)]
            kernel = stored_runs(host, stored_row, median=not args.mean_only, work_speed_cv=args.work_speed_cv,
                                 tick_late=tick_late, forget_tick_late=args.forget_tick_late,
                                 wakeup_cost_us=args.wakeup_cost_us, lengths=not args.lognormal_background)
            measurement = {k: v for k, v in stored_row.items() if k in KERNEL_KEYS}
            unpaired = simulator_runs(text, kernel, seeds=args.seeds)
            if args.grid == "edge":
                rows.append(edge_row(config, measurement, scenario_alone(text, args.seeds), unpaired))
            else:
                rows.append(row(config, measurement, unpaired, simulator_runs(text, kernel, paired=True)))
            progress.advance(bar)
    runs = len(rows[0]["kernel_ratio"])
    if args.grid == "edge":
        text = edge_markdown(rows, runs, args.seeds, args.duration_s, host, len(configs), args.only_differing)
    else:
        text = markdown(rows, runs, args.seeds, args.duration_s, host, args.regrade, args.kernel, args.grid)
    if args.work_speed_cv is not None:
        text += (f"\nRows measured before the probe measured the work's spread run to run assume "
                 f"`machine.work_speed_cv = {args.work_speed_cv:g}` (`--work-speed-cv`).\n")
    if tick_late is not None:
        text += (f"\nRows measured before the probe looked for late ticks assume `machine.tick_late_share = "
                 f"{tick_late['share']:g}`, `tick_late_us = {tick_late['late_us']:g}`, `tick_late_together = "
                 f"{tick_late['together']:g}` (`--tick-late`).\n")
    if args.forget_tick_late:
        text += ("\nThe rows' own late ticks, measured by the probe before probe11 (which took a wake-up's or a "
                 "preemption's charge for a late tick), are left out (`--forget-tick-late`).\n")
    if args.lognormal_background:
        text += ("\nThe background's lengths are drawn from the log-normal of each run's median and mean, not from "
                 "the lengths its probe kept (`--lognormal-background`).\n")
    if args.wakeup_cost_us is not None:
        text += (f"\nRows measured before the probe timed run/sleep work assume `machine.wakeup_cost_us = "
                 f"{args.wakeup_cost_us:g}` (`--wakeup-cost-us`).\n")
    args.out.write_text(text)
    save(args.out.with_suffix(".json"), {"host": host, "rows": rows})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
