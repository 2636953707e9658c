"""What a run/sleep cycle costs beyond its work, on a kernel (issue #34: the
6.12 guest's 1-2 thread edge rows use 1-2 % more CPU than the simulator gives
their work at the probe's speed).

  python docs/edge-meet/cycle10/cycle_cost.py KERNEL OUT.json   (KERNEL: host or 6.12; root)

Threads that run `run_us` of calibrated work and sleep 1.86 times that, in an
unlimited group, 3 runs of 2 s per shape. Per run: the CPU the threads used
(`cpu_usec`), the work they did (`work_usec`), the probe's work speed, and
what the CPU exceeds the work at that speed by, per run phase. A fixed cost per
cycle (the sleep's syscall and the switch paths the kernel charges to the
thread) stays the same per phase across shapes; a speed error grows with the
run.
"""
import json
import sys

from throttlelab import _native, compare, vm

SHAPES = [(10_000, 18_600), (2_000, 3_720), (500, 930)]


def scenario(run_us: int, sleep_us: int, threads: int) -> str:
    return _native.scenario_toml(f"cycle_cost.py: {threads} thread(s) of {run_us} us run, {sleep_us} us sleep, unlimited.", {
        "name": f"cycle-{run_us}-{threads}t", "duration_s": 2,
        "machine": {"cpus": 2, "hz": 250}, "kernel": {"profile": "6.12"},
        "cgroup": [{"name": "app"}],
        "task": [{"name": "rs", "cgroup": "app", "threads": threads, "phases": [{"run_us": run_us}, {"sleep_us": sleep_us}]}],
    })


def shape_runs(on):
    """Every shape's kernel runs (1 and 2 threads, each run length, 3 runs): (threads, run_us, run document)."""
    for threads in (1, 2):
        for run_us, sleep_us in SHAPES:
            for k in compare.kernel_runs(scenario(run_us, sleep_us, threads), runs=3, on=on):
                yield threads, run_us, k


def measured(threads: int, run_us: int, k: dict) -> dict:
    """One run: the CPU its threads used, their work, the probe's speed, and
    what the CPU exceeds the work at that speed by, per run phase."""
    task, host = k["tasks"]["rs"], k["host"]
    ws = host.get("work_speed") or 1.0
    phases = task["work_usec"] / run_us
    extra_us = (task["cpu_usec"] - task["work_usec"] / ws) / phases
    return {"threads": threads, "run_us": run_us, "cpu_usec": task["cpu_usec"], "work_usec": task["work_usec"],
            "work_speed": ws, "phases": phases, "extra_us_per_phase": extra_us}


def main() -> None:
    kernel, out = sys.argv[1], sys.argv[2]
    on = None if kernel == "host" else vm.runner(vm.kernel(kernel, print), accel="tcg")
    rows = []
    for threads, run_us, k in shape_runs(on):
        r = measured(threads, run_us, k)
        rows.append(r)
        print(f"{threads} thread(s), run {run_us} us: cpu {r['cpu_usec']} us, work {r['work_usec']} us, "
              f"speed {r['work_speed']:.3f}, {r['phases']:.0f} phases, {r['extra_us_per_phase']:+.1f} us a phase beyond the work", flush=True)
    json.dump({"kernel": kernel, "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
