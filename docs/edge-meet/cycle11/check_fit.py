"""The probe's run/sleep fit (issue #34, cycle11), checked against cycle10's
direct measure of what a run/sleep cycle costs beyond its work.

  python docs/edge-meet/cycle11/check_fit.py KERNEL OUT.json   (KERNEL: host or 6.12; root; under tl-measure)

(a) The probe alone, 3 times: 3 kernel runs of a thread that only sleeps
(each run's probe is the real backend's, as a grid row's), printing each
probe's fit: `wakeup_cost_us` (the intercept: CPU a wake-up costs beyond its
work) and `run_sleep_work_speed` (1 / the slope), beside the spinners'
`work_speed`.

(b) cycle10's shapes (docs/edge-meet/cycle10/cycle_cost.py: 1 and 2 threads
of 10, 2 and 0.5 ms runs, sleeping 1.86 times that, unlimited, 3 runs of
2 s each), printing per run what its CPU exceeded its work at the spinners'
speed by, per run phase (cycle10's number), and what the same run's probe
fit predicts for it: wakeup_cost_us + work per phase x (1 / run_sleep_work_speed
- 1 / work_speed).
"""
import json
import sys
from pathlib import Path

from throttlelab import _native, compare, vm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cycle10"))
from cycle_cost import measured, shape_runs  # noqa: E402

SLEEPER = _native.scenario_toml("check_fit.py: a thread that sleeps, for its run's probe.", {
    "name": "probe-only", "duration_s": 0.2,
    "machine": {"cpus": 2, "hz": 250}, "kernel": {"profile": "6.12"},
    "cgroup": [{"name": "app"}],
    "task": [{"name": "idle", "cgroup": "app", "phases": [{"run_us": 100}, {"sleep_us": 100_000}]}],
})


def fit(host: dict) -> dict:
    return {k: host.get(k) for k in ("release", "work_speed", "run_sleep_work_speed", "wakeup_cost_us")}


def predicted_us(host: dict, work_us: float) -> float | None:
    """What the run's probe fit says a phase of ``work_us`` costs beyond it at the spinners' speed."""
    if host.get("wakeup_cost_us") is None or not host.get("work_speed"):
        return None
    return host["wakeup_cost_us"] + work_us * (1 / host["run_sleep_work_speed"] - 1 / host["work_speed"])


def main() -> None:
    kernel, out = sys.argv[1], sys.argv[2]
    on = None if kernel == "host" else vm.runner(vm.kernel(kernel, print), accel="tcg")
    probes = [fit(k["host"]) for k in compare.kernel_runs(SLEEPER, runs=3, on=on)]
    for p in probes:
        print(f"probe on {p['release']}: spin speed {p['work_speed']:.4f}, run/sleep speed "
              f"{p['run_sleep_work_speed'] or float('nan'):.4f}, {p['wakeup_cost_us'] or float('nan'):+.1f} us a wake-up", flush=True)
    rows = []
    for threads, run_us, k in shape_runs(on):
        r, host = measured(threads, run_us, k), k["host"]
        want = predicted_us(host, run_us)
        rows.append({**r, "predicted_us_per_phase": want, **fit(host)})
        print(f"{threads} thread(s), run {run_us} us: {r['extra_us_per_phase']:+.1f} us a phase beyond the work at speed "
              f"{r['work_speed']:.3f}; the run's probe fit says {want if want is not None else float('nan'):+.1f} "
              f"(wake-up {host.get('wakeup_cost_us') or float('nan'):+.1f} us, run/sleep speed "
              f"{host.get('run_sleep_work_speed') or float('nan'):.4f})", flush=True)
    json.dump({"kernel": kernel, "probes": probes, "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
