"""Pair a stored `throttlelab diff -o DIR` run again with the simulator,
without and with the run's own late ticks (`diff.tick_late`, the simulator's
`machine.tick_late_*`), and compare the periods each side throttled in,
whatever the CPU (one thread runs on either CPU):

    python docs/edge-diff/spin612/repair.py DIR SCENARIO.toml [--show]

Per run: the run's late ticks (the trace's; the paired run takes the probe's
where it found some, as `diff` does); per pairing, the throttled periods (cpu.stat's
nr_throttled), the periods throttled on one side only, and (--show) the
first such period with both sides' events and the worker ticks later than
0.5 ms in it.
"""

import gzip
import json
import sys
from pathlib import Path

from throttlelab import _native, diff


def trace_text(d: Path, n: int) -> str:
    plain = d / f"run-{n}.bw.txt"
    return plain.read_text() if plain.exists() else gzip.decompress((d / f"run-{n}.bw.txt.gz").read_bytes()).decode()


def throttled_periods(stream, period_ns: int, end_ns: int) -> list[int]:
    """Starts (ns) of the periods with a throttle, by the period's refill."""
    p = diff.Periods.of(stream)
    return sorted({p.start(i) for i, evs in enumerate(p.events) if any(e.kind == "throttle" for e in evs) and p.start(i) <= end_ns})


def main(d: Path, scenario: Path, show: bool) -> None:
    text = scenario.read_text()
    resolved = json.loads(_native.validate(text, []))
    tg, name = diff.limited_group(resolved)
    period_ns = resolved["cgroups"][tg - 1]["period_us"] * 1000
    end_ns = round(resolved["duration_s"] * 1e9)
    for run in json.loads((d / "diff.json").read_text())["runs"]:
        n = run["run"]
        trace = trace_text(d, n)
        kout = {"host": run["host"], "duration_s": resolved["duration_s"], "cgroups": {name: run["kernel"]}}
        late = diff.tick_late(diff.worker_ticks(trace), round(1e9 / (run["host"].get("hz") or 250)))
        print(f"run {n}: late ticks {late and {k: round(v, 3) for k, v in late.items()}}; kernel throttled {run['kernel']['nr_throttled']}/{run['kernel']['nr_periods']}")
        start_ns = round(run["host"]["uptime_s"] * 1e9)
        late_at = [(at - start_ns, cpu, ns) for at, cpu, ns in diff.worker_ticks(trace) if diff.TICK_LATE_NS < ns < 4_000_000]
        for with_late in (False, True):
            # Without: neither the trace's late ticks nor the probe's (where it found some).
            host = run["host"] if with_late else {k: v for k, v in run["host"].items() if k != "tick_late"}
            r = diff.pair_run(text, resolved, {**kout, "host": host}, trace, [f"seed={n}"], late_ticks=with_late)
            kernel, sim = r["streams"]
            kt, st = throttled_periods(kernel, period_ns, end_ns), throttled_periods(sim, period_ns, end_ns)
            # Periods paired by their refills, as diff pairs them (within half a period).
            only_k = [t for t in kt if not any(abs(t - u) * 2 <= period_ns for u in st)]
            only_s = [t for t in st if not any(abs(t - u) * 2 <= period_ns for u in kt)]
            print(f"  {'with' if with_late else 'without'} late ticks: simulator throttled {r['sim']['nr_throttled']}/{r['sim']['nr_periods']}; "
                  f"periods throttled by the kernel only {len(only_k)}, by the simulator only {len(only_s)}")
            if show and (only_k or only_s):
                t0 = min(only_k + only_s)
                side = "kernel" if t0 in only_k else "simulator"
                print(f"    first: the period from {t0 / 1e6:.3f} ms, throttled by the {side} only")
                for label, stream in (("kernel", kernel), ("simulator", sim)):
                    evs = [e for e in stream.events if t0 - period_ns // 2 <= e.t_ns < t0 + period_ns and e.kind != "return"]
                    print(f"      {label}: " + "; ".join(e.text(t0) for e in evs))
                lt = [f"CPU {c} {(at - t0) / 1e6:+.3f} ms {ns / 1e3:.0f} us late" for at, c, ns in late_at if t0 - period_ns // 2 <= at < t0 + period_ns]
                print("      kernel ticks > 0.5 ms late (expiry from the period start): " + ("; ".join(lt) or "none"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), "--show" in sys.argv[3:])
