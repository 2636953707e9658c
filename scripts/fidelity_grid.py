"""Measure the simulator against the host kernel over issue #3's grid of spinner
scenarios and write the table to docs/fidelity-grid.md (and the raw data to
docs/fidelity-grid.json).

Grid: 1 and 2 spinning threads; quota of 1x, 1.5x and 2x the period; periods of
5, 10, 20, 50 and 100 ms; without burst and with a burst of half the quota.
Each configuration runs --runs times on the kernel and over as many seeds in the
simulator (``throttlelab.compare``), twice: unpaired, the headline (each seed
draws its own start and period timer phases, as a user's prediction must), and
paired, a diagnostic (seed i starts, with its timer, where kernel run i did).
Needs root and a cpu controller.

    python scripts/fidelity_grid.py --runs 3 --duration-s 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path

from rich.progress import Progress

from throttlelab.compare import kernel_runs, simulator_runs, verdicts

SCENARIO = """name = "fidelity-{threads}t-{period_us}-{quota_us}-{burst_us}"
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
name = "spin"
cgroup = "app"
threads = {threads}
phases = [{{ run_us = 1_000_000_000 }}]
"""

THREADS = (1, 2)
QUOTA_FACTORS = (1.0, 1.5, 2.0)
PERIODS_MS = (5, 10, 20, 50, 100)
BURST = (False, True)


def configurations():
    for threads, factor, period_ms, burst in itertools.product(THREADS, QUOTA_FACTORS, PERIODS_MS, BURST):
        period_us = period_ms * 1000
        quota_us = int(factor * period_us)
        yield dict(threads=threads, period_us=period_us, quota_us=quota_us, burst_us=quota_us // 2 if burst else 0)


def row(config: dict, kernel: list[dict], unpaired: list[dict], paired: list[dict]) -> dict:
    ratio = lambda docs: [d["cgroups"]["app"]["throttled_ratio"] for d in docs]  # noqa: E731
    mean = lambda docs, metric: statistics.fmean(d["cgroups"]["app"][metric] for d in docs)  # noqa: E731
    drawn, placed = verdicts(kernel, unpaired)["app"]["throttled_ratio"], verdicts(kernel, paired)["app"]["throttled_ratio"]
    return {
        **config,
        "kernel_ratio": ratio(kernel),
        "sim_ratio": ratio(unpaired),
        "sim_ratio_paired": ratio(paired),
        "alike": drawn["alike"],
        "mean_in_range": drawn["mean_in_range"],
        "alike_paired": placed["alike"],
        "mean_in_range_paired": placed["mean_in_range"],
        "kernel_throttled_ms": mean(kernel, "throttled_usec") / 1e3,
        "sim_throttled_ms": mean(unpaired, "throttled_usec") / 1e3,
        "kernel_usage_s": mean(kernel, "usage_usec") / 1e6,
        "sim_usage_s": mean(unpaired, "usage_usec") / 1e6,
        "background_per_s": statistics.fmean(r["host"]["background_per_s"] for r in kernel),
        "background_us": statistics.fmean(r["host"]["background_us"] for r in kernel),
        "timer_offset_us": [r["host"].get("period_timer_offset_us", {}).get("app") for r in kernel],
        "uptime_s": [r["host"]["uptime_s"] for r in kernel],
    }


def markdown(rows: list[dict], runs: int, seeds: int, duration_s: float, host: dict) -> str:
    count = lambda key: sum(r[key] for r in rows)  # noqa: E731
    lines = [
        f"Host {host['release']}, HZ={host['hz']}, cgroup {host['cgroup']}; {runs} kernel runs and "
        f"{seeds} simulator seeds ({runs} paired) of {duration_s:g} s per configuration "
        f"(`python scripts/fidelity_grid.py --runs {runs} --seeds {seeds} --duration-s {duration_s:g}`).",
        f"**Unpaired** (each seed draws its own start and period timer phases): the simulator's throttled ratios and "
        f"the kernel's could be one distribution (Mann-Whitney U, two-sided, 5 %) in {count('alike')} of {len(rows)} "
        f"configurations; the simulator's mean lies inside the kernel's range in {count('mean_in_range')}.",
        f"Paired (a diagnostic: seed i starts, and puts its period timer, where kernel run i did): "
        f"{count('alike_paired')} alike, mean inside the range in {count('mean_in_range_paired')}.",
        "The simulator's background activity is what the probe measured before each configuration's kernel runs: "
        f"{min(r['background_per_s'] for r in rows):.0f}-{max(r['background_per_s'] for r in rows):.0f} preemptions "
        f"per CPU and second of {min(r['background_us'] for r in rows):.0f}-{max(r['background_us'] for r in rows):.0f} us each.",
        "",
        "| threads | period | quota | burst | kernel throttled % (runs) | sim unpaired (seeds) | verdict | mean in range | sim paired (seeds) | paired verdict | kernel / sim throttled ms | kernel / sim usage s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    pct = lambda xs: f"{100 * statistics.fmean(xs):.1f} ({' '.join(f'{100 * x:.0f}' for x in xs)})"  # noqa: E731
    for r in rows:
        lines.append(
            f"| {r['threads']} | {r['period_us'] // 1000} ms | {r['quota_us'] / 1000:g} ms | {r['burst_us'] / 1000:g} ms "
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
    parser.add_argument("--seeds", type=int, default=20, help="Simulator seeds per configuration, unpaired.")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "fidelity-grid.md")
    args = parser.parse_args()
    configs = list(configurations())
    rows, host = [], None
    with Progress(transient=True) as progress:
        bar = progress.add_task("fidelity grid", total=len(configs))
        for config in configs:
            text = SCENARIO.format(duration_s=args.duration_s, **config)
            kernel = kernel_runs(text, runs=args.runs)
            host = kernel[0]["host"]
            unpaired = simulator_runs(text, kernel, seeds=args.seeds)
            rows.append(row(config, kernel, unpaired, simulator_runs(text, kernel, paired=True)))
            progress.advance(bar)
    args.out.write_text(markdown(rows, args.runs, args.seeds, args.duration_s, host))
    args.out.with_suffix(".json").write_text(json.dumps({"host": host, "rows": rows}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
