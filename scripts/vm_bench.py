"""What a run on another kernel costs: ``throttlelab real --kernel`` boots the
kernel under QEMU for every run. Prints, per kernel, the boot time (QEMU's start
to the guest's init), the whole run's wall time and what remains beside the
scenario's own duration (the probe, the start, teardown and power-off), over
--runs runs of a 1 s scenario. Needs root, QEMU, busybox and cpio, and fetches
Debian's images once (docs/vm.md).

    python scripts/vm_bench.py [--kernel 6.1 --kernel 6.12] [--runs 3] [--accel tcg]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

SCENARIO_S = 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", help="a release or an image path (repeatable; default 6.1 and 6.12)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--accel", default="auto", choices=("auto", "kvm", "tcg"))
    args = parser.parse_args()
    print(f"{'kernel':<36} {'accel':>5} {'boot s':>7} {'wall s':>7} {'beside the run s':>17}")
    for kernel in args.kernel or ["6.1", "6.12"]:
        boot, wall, accel = [], [], "?"
        for _ in range(args.runs):
            cmd = [sys.executable, "-m", "throttlelab", "real", "two-spinners", "--json", "--kernel", kernel,
                   "--accel", args.accel, "--set", f"duration_s={SCENARIO_S}"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return done.returncode
            v = json.loads(done.stdout)["host"]["vm"]
            boot.append(v["boot_s"])
            wall.append(v["wall_s"])
            accel, name = v["accel"], v["kernel"]
        print(f"{name:<36} {accel:>5} {statistics.median(boot):>7.2f} {statistics.median(wall):>7.2f} "
              f"{statistics.median(wall) - statistics.median(boot) - SCENARIO_S:>17.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
