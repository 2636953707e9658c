"""The seeds' fixes on a real kernel: Ugedal and Kumar's Table II and rewrite
experiments (000 III-A, V-A) on a 6.12 kernel built with kernel/patches
(scripts/build_kernel.sh), booted under QEMU, beside the simulator with the same
features. Writes docs/kernel-patches.md (and the raw runs beside it as JSON).

Each configuration runs the paper's three variants: Baseline (no feature), Slush
(SLUSH_FUND / ``slush_fund``) and All (also NOOP_BANDWIDTH_UPDATE /
``noop_update``), --runs times in the VM and over --seeds seeds in the simulator,
set up like the guest (profile 6.12, its CONFIG_HZ and background),
unpaired. The workload is the paper's on the VM's 2 CPUs: 2 busy threads under
a quota of 2 CPUs, at a 100 ms and a 10 ms period, and at 10 ms with the same
values rewritten every 37 ms (000 III-A2). Needs root, QEMU and the kernel.

    K=$(bash scripts/build_kernel.sh | tail -1)
    python scripts/kernel_patches.py --kernel "$K" --runs 5

``--regrade docs/kernel-patches.json`` holds the stored kernel runs against
this simulator instead (seconds, no VM): after a change to the simulator.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from rich.progress import Progress

from throttlelab import vm
from throttlelab._native import scenario_toml
from throttlelab.compare import kernel_runs, same_distribution, simulator_runs

def scenario_text(duration_s: float, features: list[str], period_us: int, rewrites: bool) -> str:
    """Two spinners under a quota of 2 CPUs at ``period_us`` on 2 CPUs, on 6.12
    with ``features``; with ``rewrites``, cpu.max rewritten every 37 ms."""
    scenario = {
        "name": "kernel-patches",
        "duration_s": duration_s,
        "machine": {"cpus": 2, "hz": 250},
        "kernel": {"profile": "6.12", "features": features},
        "cgroup": [{"name": "app", "period_us": period_us, "quota_us": 2 * period_us}],
        "task": [{"name": "sysbench", "cgroup": "app", "threads": 2, "phases": [{"run_us": 1_000_000_000}]}],
    }
    if rewrites:
        scenario["write"] = [{"cgroup": "app", "start_ms": 37, "every_ms": 37}]
    return scenario_toml("Ugedal and Kumar's fixes on a real kernel (scripts/kernel_patches.py).", scenario)


#: (label, period, rewrites every 37 ms)
CONFIGS = (("100 ms", 100_000, False), ("10 ms", 10_000, False), ("10 ms, rewritten every 37 ms", 10_000, True))
VARIANTS = (("Baseline", []), ("Slush", ["slush_fund"]), ("All", ["slush_fund", "noop_update"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    runs_from = parser.add_mutually_exclusive_group(required=True)
    runs_from.add_argument("--kernel", help="the patched kernel image (scripts/build_kernel.sh prints it)")
    runs_from.add_argument("--regrade", type=Path, metavar="JSON", help="the kernel runs stored by an earlier run, held against this simulator")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--duration-s", type=float, default=3.0)
    parser.add_argument("--accel", choices=vm.ACCELS, default="auto")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "kernel-patches.md")
    args = parser.parse_args()
    stored = {(r["config"], r["variant"]): r for r in json.loads(args.regrade.read_text())} if args.regrade else None
    if stored:
        # The stored runs' length (3 s before rows kept it).
        args.duration_s = next(iter(stored.values())).get("duration_s", 3.0)
    on = None if stored else vm.runner(vm.kernel(args.kernel, print), args.accel)
    rows = []
    with Progress(transient=True) as progress:
        bar = progress.add_task("kernel patches", total=len(CONFIGS) * len(VARIANTS))
        for label, period_us, rewrites in CONFIGS:
            for variant, features in VARIANTS:
                text = scenario_text(args.duration_s, features, period_us, rewrites)
                kernel = stored_runs(stored[label, variant]) if stored else kernel_runs(text, runs=args.runs, on=on)
                sim = simulator_runs(text, kernel, seeds=args.seeds)
                ratio = lambda docs: [d["cgroups"]["app"]["throttled_ratio"] for d in docs]  # noqa: E731
                rows.append({"config": label, "variant": variant, "features": features, "kernel": ratio(kernel),
                             "sim": ratio(sim), "alike": same_distribution(ratio(kernel), ratio(sim)),
                             "hosts": [d["host"] for d in kernel], "duration_s": args.duration_s,
                             "sim_profile": sim[0]["profile"]})
                progress.advance(bar)
    args.out.write_text(markdown(rows, args))
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out}")


def stored_runs(row: dict) -> list[dict]:
    """A stored row's kernel runs, as far as the simulator needs them: each
    run's host (a row from before the hosts were kept: the first run's, for all)."""
    hosts = row.get("hosts") or [row["host"]] * len(row["kernel"])
    return [{"host": h, "cgroups": {"app": {"throttled_ratio": x}}} for h, x in zip(hosts, row["kernel"])]


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    host = rows[0]["hosts"][0]
    pct = lambda xs: f"{100 * statistics.fmean(xs):.1f} ({' '.join(f'{100 * x:.0f}' for x in xs)})"  # noqa: E731
    lines = [
        f"Kernel {host['release']} with kernel/patches under QEMU ({host['vm']['accel'].upper()}, 2 CPUs), HZ={host['hz']}, "
        f"cgroup {host['cgroup']}; {len(rows[0]['kernel'])} runs of {args.duration_s:g} s per row in the VM, {args.seeds} simulator seeds "
        f"(profile {rows[0]['sim_profile']}, unpaired) ("
        + (f"the stored kernel runs held against this simulator: `python scripts/kernel_patches.py --regrade {args.regrade} "
           f"--seeds {args.seeds}`" if args.regrade else
           f"`python scripts/kernel_patches.py --kernel K --runs {args.runs} --seeds {args.seeds} --duration-s {args.duration_s:g}`")
        + "). Throttled periods in %, mean (each run or the first seeds).",
        "",
        "| configuration | variant | kernel (runs) | simulator (seeds) | U test |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        sim = r["sim"]
        lines.append(f"| {r['config']} | {r['variant']} | {pct(r['kernel'])} | {100 * statistics.fmean(sim):.1f} "
                     f"({' '.join(f'{100 * x:.0f}' for x in sim[:10])}{' ...' if len(sim) > 10 else ''}) | "
                     f"{'alike' if r['alike'] else 'differs'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
