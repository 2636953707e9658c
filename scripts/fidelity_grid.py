"""Measure the simulator against the host kernel over issue #3's grid of spinner
scenarios and write the table to docs/fidelity-grid.md (and the raw data to
docs/fidelity-grid.json).

Grid: 1 and 2 spinning threads; quota of 1x, 1.5x and 2x the period; periods of
5, 10, 20, 50 and 100 ms; without burst and with a burst of half the quota.
Each configuration runs --runs times on the kernel and over as many seeds in the
simulator (``throttlelab.compare``). Needs root and a cpu controller.

    python scripts/fidelity_grid.py --runs 3 --duration-s 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path

from rich.progress import Progress

from throttlelab.compare import compare

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


def row(config: dict, result: dict) -> dict:
    rows = result["cgroups"]["app"]
    ratio, thr = rows["throttled_ratio"], rows["throttled_usec"]
    return {
        **config,
        "kernel_ratio": [r["cgroups"]["app"]["throttled_ratio"] for r in result["kernel_runs"]],
        "sim_ratio": [r["cgroups"]["app"]["throttled_ratio"] for r in result["sim_runs"]],
        "kernel_throttled_ms": thr["kernel"]["mean"] / 1e3,
        "sim_throttled_ms": thr["sim"]["mean"] / 1e3,
        "kernel_usage_s": rows["usage_usec"]["kernel"]["mean"] / 1e6,
        "sim_usage_s": rows["usage_usec"]["sim"]["mean"] / 1e6,
        "inside": ratio["inside"],
        "background_per_s": result["host"]["background_per_s"],
        "background_us": result["host"]["background_us"],
        "timer_offset_us": [r["host"].get("period_timer_offset_us", {}).get("app") for r in result["kernel_runs"]],
        "uptime_s": [r["host"]["uptime_s"] for r in result["kernel_runs"]],
    }


def markdown(rows: list[dict], runs: int, duration_s: float, host: dict) -> str:
    inside = sum(r["inside"] for r in rows)
    lines = [
        f"Host {host['release']}, HZ={host['hz']}, cgroup {host['cgroup']}; {runs} kernel runs and "
        f"{runs} simulator seeds of {duration_s:g} s per configuration "
        f"(`python scripts/fidelity_grid.py --runs {runs} --duration-s {duration_s:g}`).",
        f"The simulator's mean throttled ratio lies inside the kernel's range in {inside} of {len(rows)} configurations.",
        "The simulator's background activity is what the probe measured before each configuration's kernel runs: "
        f"{min(r['background_per_s'] for r in rows):.0f}-{max(r['background_per_s'] for r in rows):.0f} preemptions "
        f"per CPU and second of {min(r['background_us'] for r in rows):.0f}-{max(r['background_us'] for r in rows):.0f} us each. "
        "Simulator run i starts where kernel run i started against the tick grid (`machine.uptime_s`) and puts the "
        "period timer where kernel run i found it (`period_timer_offset_us`).",
        "",
        "| threads | period | quota | burst | kernel throttled % (runs) | sim throttled % (seeds) | verdict | kernel / sim throttled ms | kernel / sim usage s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    pct = lambda xs: " ".join(f"{100 * x:.0f}" for x in xs)
    for r in rows:
        lines.append(
            f"| {r['threads']} | {r['period_us'] // 1000} ms | {r['quota_us'] / 1000:g} ms | {r['burst_us'] / 1000:g} ms "
            f"| {100 * statistics.fmean(r['kernel_ratio']):.1f} ({pct(r['kernel_ratio'])}) "
            f"| {100 * statistics.fmean(r['sim_ratio']):.1f} ({pct(r['sim_ratio'])}) "
            f"| {'inside' if r['inside'] else 'outside'} "
            f"| {r['kernel_throttled_ms']:.0f} / {r['sim_throttled_ms']:.0f} "
            f"| {r['kernel_usage_s']:.2f} / {r['sim_usage_s']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration-s", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "fidelity-grid.md")
    args = parser.parse_args()
    configs = list(configurations())
    rows, host = [], None
    with Progress(transient=True) as progress:
        bar = progress.add_task("fidelity grid", total=len(configs))
        for config in configs:
            result = compare(SCENARIO.format(duration_s=args.duration_s, **config), runs=args.runs)
            host = result["host"]
            rows.append(row(config, result))
            progress.advance(bar)
    args.out.write_text(markdown(rows, args.runs, args.duration_s, host))
    args.out.with_suffix(".json").write_text(json.dumps({"host": host, "rows": rows}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
