"""The kernel against itself: how often one stored kernel sample of a grid is
alike to the grid's other samples, beside how often the simulator is alike to it.

Each argument is a regraded grid JSON of ``scripts/fidelity_grid.py`` (one
sample of the same configurations, measured in its own holds). For each
sample, a row's kernel runs are held against the other samples' runs of the
same configuration, pooled, with the U test ``compare`` uses
(``same_distribution``: two-sided, 5 %). That count is what a predictor that
knows the kernel's distribution perfectly, but not the sample's hold, could
expect at most; the simulator's count (the row's ``alike``, set up like the
host) is printed beside it, with the simulator's misses that fall on rows
where the kernel's own samples differ. Last, what the test gives a predictor
that draws from the kernel's runs of every sample pooled (a kernel that does
not change between holds): 5 draws against 20, as a grid row has them.

    python scripts/kernel_repeatability.py docs/fidelity-edge.json docs/fidelity-edge-second.json docs/fidelity-edge-third.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
from pathlib import Path

from fidelity_grid import key  # this directory's: a row's configuration, as the grids store it
from throttlelab.compare import same_distribution


def load(path: Path) -> dict[tuple, dict]:
    return {key(r): r for r in json.loads(path.read_text())["rows"]}


def kernel_alike(sample: dict[tuple, dict], others: list[dict[tuple, dict]]) -> dict[tuple, bool]:
    """Per row both have: whether ``sample``'s kernel runs are alike to the
    ``others``' runs of the same configuration, pooled."""
    shared = [k for k in sample if all(k in o for o in others)]
    return {k: same_distribution(sample[k]["kernel_ratio"], [x for o in others for x in o[k]["kernel_ratio"]])
            for k in shared}


def stationary(samples: list[dict[tuple, dict]], trials: int = 40, seed: int = 1) -> list[int]:
    """Rows alike in each of ``trials`` draws of a grid from a kernel that
    does not change between holds: per row, 5 runs and 20 seeds drawn with
    replacement from every sample's runs of it, pooled."""
    rng = random.Random(seed)
    shared = [k for k in samples[0] if all(k in s for s in samples)]
    pools = [[x for s in samples for x in s[k]["kernel_ratio"]] for k in shared]
    return [sum(same_distribution(rng.choices(pool, k=5), rng.choices(pool, k=20)) for pool in pools)
            for _ in range(trials)]


def report(paths: list[Path]) -> str:
    samples = {p: load(p) for p in paths}
    lines = [
        "| sample | rows | kernel alike to the other samples' runs, pooled | simulator alike (like host) "
        "| simulator misses on rows where the kernel's samples differ |",
        "|---|---|---|---|---|",
    ]
    for path, sample in samples.items():
        own = kernel_alike(sample, [s for p, s in samples.items() if p != path])
        sim = {k: sample[k]["alike"] for k in own}
        both = sum(1 for k in own if not sim[k] and not own[k])
        lines.append(f"| {path.name} | {len(own)} | {sum(own.values())} ({sum(own.values()) / len(own):.0%}) "
                     f"| {sum(sim.values())} ({sum(sim.values()) / len(own):.0%}) | {both} of {len(own) - sum(sim.values())} |")
    lines += ["", "| sample | against | rows | kernel alike |", "|---|---|---|---|"]
    for (pa, a), (pb, b) in itertools.combinations(samples.items(), 2):
        own = kernel_alike(a, [b])
        lines.append(f"| {pa.name} | {pb.name} | {len(own)} | {sum(own.values())} ({sum(own.values()) / len(own):.0%}) |")
    alike = stationary(list(samples.values()))
    lines += ["", f"A kernel that does not change between holds (each row's runs of every sample pooled; 5 draws "
              f"against 20, {len(alike)} grids): {statistics.fmean(alike):.1f} rows alike on average, "
              f"{min(alike)}-{max(alike)}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grids", type=Path, nargs="+", metavar="GRID.json", help="Two or more samples of one grid, regraded.")
    args = parser.parse_args()
    if len(args.grids) < 2:
        parser.error("needs at least two samples of the grid")
    try:
        print(report(args.grids), end="")
    except (OSError, ValueError, KeyError) as e:
        print(f"kernel_repeatability.py: error: {e!r}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
