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
simulator is checked against kernel samples it was not tuned on.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from rich.progress import Progress

from throttlelab import vm
from throttlelab.compare import Stats, kernel_runs, mean_host, same_distribution, simulator_runs

SCENARIO = """name = "fidelity-{workload}-{threads}t-{period_us}-{quota_us}-{burst_us}"
duration_s = {duration_s}
[machine]
cpus = 2
hz = 250
[kernel]
profile = "6.18"
[[cgroup]]
name = "app"
period_us = {period_us}
quota_us = {quota_us}
burst_us = {burst_us}
[[task]]
name = "{workload}"
cgroup = "app"
threads = {threads}
phases = [{phases}]
"""

#: Each workload's phases: a spinner, and a thread that runs 6 ms and sleeps
#: 4 ms (0.6 of a CPU in bursts, which a short period sees and a long one averages).
WORKLOADS = {"spin": "{ run_us = 1_000_000_000 }", "run6-sleep4": "{ run_us = 6000 }, { sleep_us = 4000 }"}


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


def configurations(grid: Grid):
    for workload, threads, factor, period_ms, burst in itertools.product(
            grid.workloads, grid.threads, grid.quota_factors, grid.periods_ms, (False, True)):
        period_us = period_ms * 1000
        quota_us = int(factor * period_us)
        yield dict(workload=workload, threads=threads, period_us=period_us, quota_us=quota_us,
                   burst_us=quota_us // 2 if burst else 0)


def measured(kernel: list[dict]) -> dict:
    """What a configuration's kernel runs measured, as a grid row keeps it."""
    app = lambda metric: [d["cgroups"]["app"][metric] for d in kernel]  # noqa: E731
    return {
        "kernel_ratio": app("throttled_ratio"),
        "kernel_throttled_ms": statistics.fmean(app("throttled_usec")) / 1e3,
        "kernel_usage_s": statistics.fmean(app("usage_usec")) / 1e6,
        "background_per_s": statistics.fmean(r["host"]["background_per_s"] for r in kernel),
        "background_us": statistics.fmean(r["host"]["background_us"] for r in kernel),
        "work_speed": mean_host([r["host"] for r in kernel]).get("work_speed"),
        "timer_offset_us": [r["host"].get("period_timer_offset_us", {}).get("app") for r in kernel],
        "uptime_s": [r["host"]["uptime_s"] for r in kernel],
    }


def stored_runs(host: dict, row: dict) -> list[dict]:
    """A stored row's kernel runs, as far as the simulator's setup needs them:
    each run's host (the configuration's mean background and work speed, its
    start, its timer; a row from before the probe timed the work takes the
    grid's host's speed)."""
    runs = []
    for ratio, uptime_s, offset_us in zip(row["kernel_ratio"], row["uptime_s"], row["timer_offset_us"]):
        run_host = {**host, "background_per_s": row["background_per_s"], "background_us": row["background_us"], "uptime_s": uptime_s}
        if row.get("work_speed") is not None:
            run_host["work_speed"] = row["work_speed"]
        if offset_us is not None:
            run_host["period_timer_offset_us"] = {"app": offset_us}
        runs.append({"host": run_host, "cgroups": {"app": {"throttled_ratio": ratio}}})
    return runs


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
KERNEL_KEYS = ("kernel_ratio", "kernel_throttled_ms", "kernel_usage_s", "background_per_s", "background_us", "work_speed", "timer_offset_us", "uptime_s")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration-s", type=float, default=2.0)
    parser.add_argument("--grid", choices=GRIDS, default="spinners", help="Issue #3's spinners, or the grid run on every release.")
    parser.add_argument("--seeds", type=int, default=20, help="Simulator seeds per configuration, unpaired.")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "fidelity-grid.md")
    parser.add_argument(
        "--regrade",
        type=Path,
        metavar="GRID.json",
        help="Measure nothing: hold the current simulator against a stored grid's kernel runs (needs no root).",
    )
    parser.add_argument("--kernel", metavar="RELEASE|PATH", help="Measure this kernel under QEMU instead of the host's.")
    parser.add_argument("--accel", choices=vm.ACCELS, default="auto")
    parser.add_argument("--cgroup", choices=vm.CGROUP_VERSIONS, default="v2", help="With --kernel: the guest's hierarchy.")
    args = parser.parse_args()
    on = vm.runner(vm.kernel(args.kernel, print), args.accel, args.cgroup) if args.kernel else None
    stored = json.loads(args.regrade.read_text()) if args.regrade else None
    configs = list(configurations(GRIDS[args.grid]))
    rows, host = [], stored["host"] if stored else None
    with Progress(transient=True) as progress:
        bar = progress.add_task("fidelity grid", total=len(configs))
        for i, config in enumerate(configs):
            text = SCENARIO.format(duration_s=args.duration_s, phases=WORKLOADS[config["workload"]], **config)
            if stored:
                assert {k: stored["rows"][i][k] for k in config} == config, "a grid of other configurations"
                kernel, measurement = stored_runs(host, stored["rows"][i]), {k: v for k, v in stored["rows"][i].items() if k in KERNEL_KEYS}
            else:
                kernel = kernel_runs(text, runs=args.runs, on=on)
                host, measurement = kernel[0]["host"], measured(kernel)
            unpaired = simulator_runs(text, kernel, seeds=args.seeds)
            rows.append(row(config, measurement, unpaired, simulator_runs(text, kernel, paired=True)))
            progress.advance(bar)
    runs = len(rows[0]["kernel_ratio"])
    args.out.write_text(markdown(rows, runs, args.seeds, args.duration_s, host, args.regrade, args.kernel, args.grid))
    args.out.with_suffix(".json").write_text(json.dumps({"host": host, "rows": rows}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
