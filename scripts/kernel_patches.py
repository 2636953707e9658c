"""The seeds' fixes on a real kernel: Ugedal and Kumar's Table II and rewrite
experiments (000 III-A, V-A), their atomic pool (IV-B) and Hegde's interleaved
period timers (001) on a 6.12 kernel built with kernel/patches
(scripts/build_kernel.sh), booted under QEMU, beside the simulator with the same
features. Writes docs/kernel-patches.md (and the raw runs beside it as JSON).

The paper's workload on the VM's 2 CPUs: 2 busy threads under a quota of 2
CPUs, at a 100 ms and a 10 ms period, and at 10 ms with the same values
rewritten every 37 ms (000 III-A2), in its three variants, Baseline (no
feature), Slush (SLUSH_FUND / ``slush_fund``) and All (also
NOOP_BANDWIDTH_UPDATE / ``noop_update``), and Atomic (ATOMIC_POOL /
``atomic_pool``) at 100 and 10 ms: throttled periods. Hegde's workload:
4 groups of 2 busy threads, each under a quarter CPU at 100 ms, Baseline and
Interleave (INTERLEAVE_TIMERS / ``interleave_timers``): throttled time per
period, the groups' mean (their timers spread, each group runs alone and burns
its quota on both CPUs, then waits longer). Each row runs --runs times in the
VM and over --seeds seeds in the simulator, set up like the guest (profile
6.12, its CONFIG_HZ and background), unpaired. Needs root, QEMU and the kernel.

    K=$(bash scripts/build_kernel.sh | tail -1)
    python scripts/kernel_patches.py --kernel "$K" --runs 5

``--regrade docs/kernel-patches.json`` holds the stored kernel runs against
this simulator instead (seconds, no VM): after a change to the simulator.
``--kernel K --keep docs/kernel-patches.json`` runs in the VM only the rows
that file does not hold (a new variant) and regrades the others.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from rich.progress import Progress

from throttlelab import vm
from throttlelab._native import scenario_toml
from throttlelab.compare import kernel_runs, same_distribution, simulator_runs


@dataclass(frozen=True)
class Config:
    """A workload on the VM's 2 CPUs: ``groups`` limited cgroups, each with
    ``threads`` busy threads under ``quota_cpus`` at ``period_us``; with
    ``rewrites``, cpu.max rewritten every 37 ms; ``metric``, what a row holds
    of each run (:data:`METRICS`)."""

    label: str
    period_us: int
    rewrites: bool = False
    groups: int = 1
    threads: int = 2
    quota_cpus: float = 2.0
    metric: str = "throttled_ratio"

    def names(self) -> list[str]:
        return ["app"] if self.groups == 1 else [f"g{i + 1}" for i in range(self.groups)]


def scenario_text(duration_s: float, features: list[str], config: Config) -> str:
    """``config`` on 6.12 with ``features``."""
    quota_us = round(config.quota_cpus * config.period_us)
    scenario = {
        "name": "kernel-patches",
        "duration_s": duration_s,
        "machine": {"cpus": 2, "hz": 250},
        "kernel": {"profile": "6.12", "features": features},
        "cgroup": [{"name": n, "period_us": config.period_us, "quota_us": quota_us} for n in config.names()],
        "task": [{"name": f"spin-{n}", "cgroup": n, "threads": config.threads, "phases": [{"run_us": 1_000_000_000}]}
                 for n in config.names()],
    }
    if config.groups == 1:
        scenario["task"][0]["name"] = "sysbench"
    if config.rewrites:
        scenario["write"] = [{"cgroup": "app", "start_ms": 37, "every_ms": 37}]
    return scenario_toml("Ugedal and Kumar's and Hegde's fixes on a real kernel (scripts/kernel_patches.py).", scenario)


#: What a row holds of each output document: (what it is, its unit, the
#: factor to the unit, the value).
METRICS = {
    "throttled_ratio": ("Throttled periods", "%", 100,
                        lambda d, names: statistics.fmean(d["cgroups"][n]["throttled_ratio"] for n in names)),
    "throttled_ms_per_period": ("Throttled time per period (`throttled_usec / nr_periods`), the groups' mean", "ms", 1,
                                lambda d, names: statistics.fmean(d["cgroups"][n]["throttled_usec"]
                                                                  / max(1, d["cgroups"][n]["nr_periods"]) / 1000 for n in names)),
}

BASELINE, SLUSH, ALL = ("Baseline", []), ("Slush", ["slush_fund"]), ("All", ["slush_fund", "noop_update"])
ATOMIC, INTERLEAVE = ("Atomic", ["atomic_pool"]), ("Interleave", ["interleave_timers"])
#: Each configuration with its variants, in the table's order.
ROWS = (
    (Config("100 ms", 100_000), (BASELINE, SLUSH, ALL, ATOMIC)),
    (Config("10 ms", 10_000), (BASELINE, SLUSH, ALL, ATOMIC)),
    (Config("10 ms, rewritten every 37 ms", 10_000, rewrites=True), (BASELINE, SLUSH, ALL)),
    (Config("4 groups x 2 threads, 0.25 CPU each, 100 ms", 100_000, groups=4, quota_cpus=0.25,
            metric="throttled_ms_per_period"), (BASELINE, INTERLEAVE)),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    runs_from = parser.add_mutually_exclusive_group(required=True)
    runs_from.add_argument("--kernel", help="the patched kernel image (scripts/build_kernel.sh prints it)")
    runs_from.add_argument("--regrade", type=Path, metavar="JSON", help="the kernel runs stored by an earlier run, held against this simulator")
    parser.add_argument("--keep", type=Path, metavar="JSON", help="with --kernel: the rows this file holds are regraded, not run again")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--duration-s", type=float, default=3.0)
    parser.add_argument("--accel", choices=vm.ACCELS, default="auto")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "kernel-patches.md")
    args = parser.parse_args()
    if args.keep and not args.kernel:
        parser.error("--keep goes with --kernel")
    stored_from = args.regrade or args.keep
    stored = {(r["config"], r["variant"]): r for r in json.loads(stored_from.read_text())} if stored_from else {}
    if stored:
        # The stored runs' length (3 s before rows kept it).
        args.duration_s = next(iter(stored.values())).get("duration_s", 3.0)
    missing = [f"{label} / {variant}" for label, variant in planned() if (label, variant) not in stored]
    if args.regrade and missing:
        parser.error(f"--regrade {args.regrade} holds no kernel runs of {', '.join(missing)}")
    on = vm.runner(vm.kernel(args.kernel, print), args.accel) if missing else None
    rows = []
    with Progress(transient=True) as progress:
        bar = progress.add_task("kernel patches", total=len(planned()))
        for config, variants in ROWS:
            value = lambda d: METRICS[config.metric][3](d, config.names())  # noqa: E731
            for variant, features in variants:
                text = scenario_text(args.duration_s, features, config)
                row = stored.get((config.label, variant))
                if row:
                    kernel, kvalues, hosts = stored_runs(row), row["kernel"], stored_hosts(row)
                else:
                    kernel = kernel_runs(text, runs=args.runs, on=on)
                    kvalues, hosts = [value(d) for d in kernel], [d["host"] for d in kernel]
                svalues = [value(d) for d in simulator_runs(text, kernel, seeds=args.seeds)]
                rows.append({"config": config.label, "variant": variant, "features": features, "metric": config.metric,
                             "kernel": kvalues, "sim": svalues, "alike": same_distribution(kvalues, svalues),
                             "hosts": hosts, "duration_s": args.duration_s, "sim_profile": "6.12",
                             "kept": bool(row) and (row.get("kept", False) if args.regrade else True)})
                progress.advance(bar)
    args.out.write_text(markdown(rows, args) + notes(args.out))
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out}")


#: The line after which docs/kernel-patches.md is written by hand: kept.
NOTES = "<!-- written by hand from here on; scripts/kernel_patches.py keeps it -->"


def notes(out: Path) -> str:
    """What ``out`` holds from :data:`NOTES` on (nothing if it has none)."""
    text = out.read_text(encoding="utf-8") if out.exists() else ""
    return "\n" + text[text.index(NOTES):] if NOTES in text else ""


def planned() -> list[tuple[str, str]]:
    return [(config.label, variant) for config, variants in ROWS for variant, _ in variants]


def stored_hosts(row: dict) -> list[dict]:
    """A stored row's hosts, one per run (a row from before the hosts were kept: the first run's, for all)."""
    return row.get("hosts") or [row["host"]] * len(row["kernel"])


def stored_runs(row: dict) -> list[dict]:
    """A stored row's kernel runs, as far as the simulator needs them: each run's host."""
    return [{"host": h} for h in stored_hosts(row)]


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    host = rows[0]["hosts"][0]
    command = (f"the stored kernel runs held against this simulator: `python scripts/kernel_patches.py --regrade {args.regrade} "
               f"--seeds {args.seeds}`" if args.regrade else
               f"`python scripts/kernel_patches.py --kernel K{f' --keep {args.keep}' if args.keep else ''} --runs {args.runs} "
               f"--seeds {args.seeds} --duration-s {args.duration_s:g}`")
    lines = [
        f"Kernel {host['release']} with kernel/patches under QEMU ({host['vm']['accel'].upper()}, 2 CPUs), HZ={host['hz']}, "
        f"cgroup {host['cgroup']}; {len(rows[0]['kernel'])} runs of {args.duration_s:g} s per row in the VM, {args.seeds} simulator seeds "
        f"(profile {rows[0]['sim_profile']}, unpaired) ({command})."
        + (" Rows marked * keep kernel runs taken on an earlier build (--keep)." if any(r.get("kept") for r in rows) else ""),
    ]
    for metric, (title, unit, factor, _) in METRICS.items():
        chosen = [r for r in rows if r.get("metric", "throttled_ratio") == metric]
        if not chosen:
            continue
        shown = lambda xs: f"{factor * statistics.fmean(xs):.1f} ({' '.join(f'{factor * x:.0f}' for x in xs[:10])}{' ...' if len(xs) > 10 else ''})"  # noqa: E731
        lines += ["", f"{title} in {unit}, mean (each run or the first seeds):", "",
                  "| configuration | variant | kernel (runs) | simulator (seeds) | U test |", "|---|---|---|---|---|"]
        for r in chosen:
            lines.append(f"| {r['config']} | {r['variant']} | {shown(r['kernel'])}{' *' if r.get('kept') else ''} | "
                         f"{shown(r['sim'])} | {'alike' if r['alike'] else 'differs'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
