"""The host's bandwidth control replayed from its charges, against the paired
simulator: docs/fidelity.md's "Two spinners at 20 ms, charge by charge".

    python docs/edge-diff/spin20/replay.py docs/edge-diff/spin20/out20 docs/edge-diff/spin20/spin2-20-40.toml
    python docs/edge-diff/spin20/replay.py docs/edge-diff/spin20/out30 docs/edge-diff/spin2-30-60.toml

The host (6.18) has no kprobes, so `diff` sees no grant. But its trace has
`sched_stat_runtime`, each charge `update_curr` makes to a worker, and that
`delta_exec` is what `account_cfs_rq_runtime` takes from the worker's cfs_rq.
Replaying 6.18's `__account_cfs_rq_runtime` / `__assign_cfs_rq_runtime`
(an ask at runtime_remaining <= 0 for `slice - runtime_remaining`, at most the
pool), `throttle_cfs_rq` (the ask failed: throttled at once),
`__refill_cfs_bandwidth_runtime` at each period timer expiry (the pool back to
quota + burst at most) and `distribute_cfs_runtime` (each throttled cfs_rq in
throttle order gets `1 - runtime_remaining`) gives the kernel's grants, its
pool and its throttles. The replay's throttles are checked against those
`diff` reads from `sched_switch` (a worker off its CPU runnable until an expiry).

Per run it prints cpu.stat (kernel, paired simulator), the replay's
throttled periods and how many match the switches', the charges (how many were
a whole tick, 3.9-4.1 ms), the grants on each side (how many, how many in phase
with the other CPU's, within 250 us, and above 9 ms), the first period where
one side throttles and the other does not, with both sides' grants in it, and
the period timer's expiry against the tick (ms after the last tick on the
timer's CPU). Then the host's background as the trace has it (other tasks
that preempted a worker: how many a CPU-second, their median length) against
the probe's (a rate and a mean length, each preemption in the simulator that
long), and the paired simulator's throttled periods and grants in phase with
its background set from each: the probe's, the trace's count and median
length, the trace's count and mean length, and the quiet default.
"""

from __future__ import annotations

import bisect
import json
import statistics
import sys
from pathlib import Path

from throttlelab import diff

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from analyse import NEAR_NS, TICKS, trace_text  # noqa: E402  (docs/edge-diff/analyse.py)

SLICE_NS = 5_000_000  # sched_cfs_bandwidth_slice_us's default


def charges(text: str, start_ns: int) -> list[tuple[int, int, int]]:
    """(t ns since the start, CPU, ns charged) of every worker charge."""
    out = []
    for t, cpu, _comm, _pid, event, f in diff.parse_lines(text):
        # The charged task is the event's own comm field (the line's is the current task's).
        if event == "sched_stat_runtime" and f.get("comm") == diff.WORKER_COMM:
            out.append((t - start_ns, cpu, int(f["runtime"])))
    return out


def ticks(text: str, start_ns: int) -> dict[int, list[int]]:
    """CPU -> the times (ns since the start) its tick's timer expired."""
    out: dict[int, list[int]] = {}
    for t, cpu, _comm, _pid, event, f in diff.parse_lines(text):
        if event == "hrtimer_expire_entry" and f.get("function") in TICKS:
            out.setdefault(cpu, []).append(t - start_ns)
    return out


def replay(charged, refills: list[int], quota_ns: int, burst_ns: int, cpus: int):
    """The kernel's grants, throttles and unthrottles from its charges and refills:
    events (t, kind, cpu, amount, pool after)."""
    rr = [1] * cpus  # tg_set_cfs_bandwidth: runtime_remaining = 1
    throttled: list[int] = []
    pool = quota_ns
    events = []
    timeline = sorted([(t, 0, None, None) for t in refills] + [(t, 1, c, d) for t, c, d in charged])
    for t, what, cpu, delta in timeline:
        if what == 0:
            pool = min(pool + quota_ns, quota_ns + burst_ns)
            events.append((t, "refill", None, None, pool))
            for c in list(throttled):
                grant = min(1 - rr[c], pool)
                rr[c] += grant
                pool -= grant
                if rr[c] > 0:
                    throttled.remove(c)
                    events.append((t, "unthrottle", c, grant, pool))
            continue
        rr[cpu] -= delta
        if rr[cpu] > 0 or cpu in throttled:
            continue
        amount = min(pool, SLICE_NS - rr[cpu]) if pool > 0 else 0
        pool -= amount
        rr[cpu] += amount
        events.append((t, "assign", cpu, amount, pool))
        if rr[cpu] <= 0:
            throttled.append(cpu)
            events.append((t, "throttle", cpu, None, pool))
    return events


def period_of(t: int, starts: list[int]) -> int:
    return bisect.bisect_right(starts, t)


def preemptions_us(text: str, start_ns: int, duration_ns: int) -> list[float]:
    """How long each preemption of a worker by another task (not the idle
    task, not a worker) lasted, in us, from ``sched_switch``."""
    out: dict[int, int] = {}
    lengths = []
    for t, cpu, _comm, _pid, event, f in diff.parse_lines(text):
        if event != "sched_switch" or not 0 <= t - start_ns <= duration_ns:
            continue
        if (f.get("prev_comm") == diff.WORKER_COMM and f.get("prev_state", "").startswith("R")
                and f.get("next_comm") != diff.WORKER_COMM and not f.get("next_comm", "").startswith("swapper")):
            out[cpu] = t
        elif f.get("next_comm") == diff.WORKER_COMM and cpu in out:
            lengths.append((t - out.pop(cpu)) / 1e3)
    return lengths


def in_phase(grants: list[tuple[int, int, int]]) -> int:
    """Grants within NEAR_NS of a grant on another CPU."""
    return sum(any(o[1] != g[1] and abs(o[0] - g[0]) <= NEAR_NS for o in grants) for g in grants)


def main(d: Path, scenario: Path) -> None:
    result = json.loads((d / "diff.json").read_text())
    text_scenario = scenario.read_text()
    resolved = json.loads(diff._native.validate(text_scenario, []))
    group = resolved["cgroups"][0]
    period_ns, quota_ns, burst_ns = group["period_us"] * 1000, group["quota_us"] * 1000, group["burst_us"] * 1000
    duration_ns = round(resolved["duration_s"] * 1e9)
    cpus = resolved["machine"]["cpus"]
    totals = {"phase": [0, 0, 0, 0], "big": [0, 0]}
    for run in result["runs"]:
        n = run["run"]
        text = trace_text(d, n)
        start_ns = round(run["host"]["uptime_s"] * 1e9)
        kernel = diff.kernel_stream(text, start_ns, start_ns + duration_ns, period_ns)
        refills = [e.t_ns for e in kernel.events if e.kind == "refill"]
        charged = charges(text, start_ns)
        mine = replay(charged, refills, quota_ns, burst_ns, cpus)
        host = dict(run["host"])
        host["tick_latency_us"] = run["tick_latency_us"]
        overrides = [f"seed={n}", *diff.start_overrides(resolved, run["start_late_us"])]
        _out, records = diff.paired_sim(text_scenario, overrides, host, 1)
        sim = diff.sim_stream(records, 1)
        k, s = run["kernel"], run["sim"]
        # Throttled periods, by each source (periods cut at each side's refills).
        in_window = lambda t: 0 <= t <= duration_ns  # noqa: E731
        replay_thr = {(period_of(t, refills), c) for t, kind, c, _a, _p in mine if kind == "throttle" and in_window(t)}
        switch_thr = {(period_of(e.t_ns, refills), e.cpu) for e in kernel.events if e.kind == "throttle" and in_window(e.t_ns)}
        sim_refills = [e.t_ns for e in sim.events if e.kind == "refill"]
        sim_thr = {(period_of(e.t_ns, sim_refills), e.cpu) for e in sim.events if e.kind == "throttle"}
        tick_sized = sum(3_900_000 <= c <= 4_100_000 for _t, _c, c in charged if in_window(_t))
        n_charges = sum(in_window(t) for t, _c, _d in charged)
        print(f"run {n}: cpu.stat throttled kernel {k['nr_throttled']}/{k['nr_periods']} ({k['throttled_usec'] / 1e3:.1f} ms), "
              f"simulator {s['nr_throttled']}/{s['nr_periods']} ({s['throttled_usec'] / 1e3:.1f} ms); usage {k['usage_usec'] / 1e6:.3f} / "
              f"{s['usage_usec'] / 1e6:.3f} s")
        print(f"  replay: {len({p for p, _c in replay_thr})} throttled periods, {len(replay_thr)} throttles "
              f"({len(replay_thr & switch_thr)} also seen from sched_switch, which saw {len(switch_thr)}); "
              f"simulator {len(sim_thr)} throttles")
        print(f"  worker charges {n_charges}, a whole tick (3.9-4.1 ms) {tick_sized}; charged {sum(c for t, _c, c in charged if in_window(t)) / 1e9:.3f} s")
        # Grants after the first period, by each side.
        kg = [(t, c, a) for t, kind, c, a, _p in mine if kind == "assign" and a and t > period_ns and in_window(t)]
        sg = [(e.t_ns, e.cpu, e.amount_ns) for e in sim.events if e.kind == "assign" and e.amount_ns and e.t_ns > period_ns]
        for i, (name, grants) in enumerate((("kernel (replay)", kg), ("simulator", sg))):
            phase = in_phase(grants)
            big = sum(a > 9_000_000 for _t, _c, a in grants)
            sizes = statistics.median(a for _t, _c, a in grants) / 1e6 if grants else 0
            totals["phase"][2 * i] += phase
            totals["phase"][2 * i + 1] += len(grants)
            totals["big"][i] += big
            print(f"  {name}: grants {len(grants)}, in phase with the other CPU's {phase}, above 9 ms {big}, median {sizes:.2f} ms")
        # The period timer against the tick on its CPU.
        tk = ticks(text, start_ns)
        expiries = [(t, cpu) for t, cpu, _comm, _pid, event, f in diff.parse_lines(text)
                    if event == "hrtimer_expire_entry" and f.get("function") == "sched_cfs_period_timer" and in_window(t - start_ns)]
        since = []
        for t, cpu in expiries:
            prior = [x for x in tk.get(cpu, []) if x <= t - start_ns]
            if prior:
                since.append((t - start_ns - prior[-1]) / 1e6)
        if since:
            print(f"  period timer: {len(since)} expiries, {statistics.median(since):.2f} ms after the tick on its CPU "
                  f"(range {min(since):.2f}-{max(since):.2f})")
        # The host's background: the trace's against the probe's, and the paired simulator with each.
        lengths = preemptions_us(text, start_ns, duration_ns)
        per_cpu_s = len(lengths) / (cpus * duration_ns / 1e9)
        print(f"  workers preempted by other tasks: {per_cpu_s:.0f} a CPU-second, median {statistics.median(lengths):.0f} us, "
              f"mean {statistics.mean(lengths):.0f} us; the probe: {run['host']['background_per_s']:.0f} a second of {run['host']['background_us']:.0f} us")
        median, mean = statistics.median(lengths), statistics.mean(lengths)
        variants = (("probe", host["background_per_s"], host["background_us"], None), ("trace, median", per_cpu_s, median, None),
                    ("trace, mean", per_cpu_s, mean, None), ("trace, log-normal", per_cpu_s, mean, median), ("quiet default", 2.0, 20.0, None))
        said = []
        for label, per_s, us, p50 in variants:
            # `host` as the probe gives it; the log-normal's median goes in as a key.
            vover = [*overrides, *([f"machine.background_us={us}", f"machine.background_p50_us={p50}"] if p50 else [])]
            vout, vrec = diff.paired_sim(text_scenario, vover, {**host, "background_per_s": per_s, "background_us": us}, 1)
            vs = diff.sim_stream(vrec, 1)
            vg = [(e.t_ns, e.cpu, e.amount_ns) for e in vs.events if e.kind == "assign" and e.amount_ns and e.t_ns > period_ns]
            said.append(f"{label} ({per_s:.0f}/s x {us:.0f} us{f', median {p50:.0f}' if p50 else ''}) {vout['cgroups'][group['name']]['nr_throttled']}, in phase {in_phase(vg)}/{len(vg)}")
            totals.setdefault(label, [0, 0, 0])
            totals[label] = [totals[label][0] + vout['cgroups'][group['name']]['nr_throttled'], totals[label][1] + in_phase(vg), totals[label][2] + len(vg)]
        totals.setdefault("kernel", [0, 0, 0])
        totals["kernel"] = [totals["kernel"][0] + k["nr_throttled"], totals["kernel"][1] + in_phase(kg), totals["kernel"][2] + len(kg)]
        print("  paired simulator, throttled periods with its background from: " + "; ".join(said))
        # The first period where the replay and the simulator disagree on who throttles.
        for p in range(1, min(len(refills), len(sim_refills))):
            kp = sorted(c for q, c in replay_thr if q == p)
            sp = sorted(c for q, c in sim_thr if q == p)
            if kp != sp:
                ks, ss = refills[p - 1], sim_refills[p - 1]
                print(f"  first period throttled on one side only: {p} (kernel CPUs {kp}, simulator {sp}); grants, ms from the period's start:")
                print("    kernel:    " + ", ".join(f"{(t - ks) / 1e6:+.2f} CPU{c} " + (f"{a / 1e6:.2f} pool {pl / 1e6:.2f}" if kind == "assign" else kind)
                                              for t, kind, c, a, pl in mine if ks <= t < ks + period_ns and kind in ("assign", "throttle")))
                print("    simulator: " + ", ".join(f"{(e.t_ns - ss) / 1e6:+.2f} CPU{e.cpu} " + (f"{e.amount_ns / 1e6:.2f}" if e.kind == "assign" else e.kind)
                                              for e in sim.events if ss <= e.t_ns < ss + period_ns and e.kind in ("assign", "throttle")))
                break
    p = totals.pop("phase")
    print(f"all runs: grants in phase kernel {p[0]} of {p[1]}, simulator {p[2]} of {p[3]}; above 9 ms kernel {totals['big'][0]}, simulator {totals['big'][1]}")
    totals.pop("big")
    print("all runs, throttled periods and grants in phase: " + "; ".join(f"{label} {t} ({ph} of {n})" for label, (t, ph, n) in totals.items()))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
