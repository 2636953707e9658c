"""Four run/sleep threads under a limit, period by period, kernel against the
paired simulator: docs/fidelity.md's "Four threads at 1.0, limited, event by event".

    python docs/edge-meet/rs4t8/periods.py HOLD/d50 HOLD/wake.trace docs/edge-meet/rs4t8/rs4-50-1.0.toml [--periods] [RUN:PERIOD ...]

HOLD is hold.sh's output: `throttlelab diff -o` (run-N.bw.txt, diff.json) and
wake.trace, our own tracefs instance's wake-ups and migrations on the same
clock (mono). The host (6.18) has no kprobes, so the kernel's bandwidth side is
replayed from its charges (`sched_stat_runtime`, each `update_curr` charge):
6.18's `__account_cfs_rq_runtime` / `__assign_cfs_rq_runtime` (an ask at
runtime_remaining <= 0 for `slice - runtime_remaining`, at most the pool; a
failed ask throttles), `check_enqueue_throttle` (a wake-up onto an empty
cfs_rq with nothing left asks, and throttles if that fails),
`__return_cfs_rq_runtime` (the group's cfs_rq on a CPU left with no worker,
runnable or running, gives all but 1 ms back), the refill at each period
timer expiry, and `distribute_cfs_runtime` (each throttled cfs_rq gets
`1 - runtime_remaining`) at refills and slack timer expiries. The replay's
throttled periods are checked against cpu.stat.

Per period on each side (cut at each side's own refills): the workers' time
on a CPU, their time waiting runnable (woken or preempted, until they run),
whether a cfs_rq was throttled, when the first throttle came, the CPU time
throttled (a throttled cfs_rq that holds a runnable worker), and the pool
left at the last ask. Then the sums and the first periods where one side
throttles and the other does not, with both sides' switches in it.
"""

from __future__ import annotations

import bisect
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from throttlelab import diff

SLICE_NS = 5_000_000  # sched_cfs_bandwidth_slice_us's default
MIN_CFS_RQ_RUNTIME_NS = 1_000_000  # what __return_cfs_rq_runtime keeps
SLEEP_US = 18600.0


def parsed(text: str, lo: int, hi: int):
    return [(t, cpu, comm, pid, ev, f) for t, cpu, comm, pid, ev, f in diff.parse_lines(text) if lo <= t <= hi]


class PeriodStats:
    """Per period: on-CPU ns, waiting ns, throttle start times (per CPU), throttled ns, asks."""

    def __init__(self, starts: list[int]):
        self.starts = starts
        self.used = defaultdict(int)
        self.wait = defaultdict(int)
        self.throttles = defaultdict(list)  # period -> [(t from its start, cpu)]
        self.throttled_ns = defaultdict(int)
        self.phases = defaultdict(int)  # run phases begun (wake-ups)
        self.charged = defaultdict(int)  # the kernel's charges to workers (sched_stat_runtime)
        self.waits: list[tuple[int, int]] = []  # every worker's waits runnable
        self.wakes: list[tuple[int, int, int]] = []  # (when, the CPU it was woken onto, the CPU it last ran on)
        self.running: dict[int, list] = defaultdict(list)  # cpu -> [(from, to, "worker"|"other"|"idle")]
        self.throttled_iv: dict[int, list] = defaultdict(list)  # cpu -> [(from, to)] its cfs_rq throttled

    def waited(self, a: int, b: int) -> None:
        self.span(self.wait, a, b)
        self.waits.append((a, b))

    def period(self, t: int) -> int:
        return bisect.bisect_right(self.starts, t)

    def span(self, what: dict, a: int, b: int) -> None:
        """Add [a, b) to ``what``, split at period starts."""
        while a < b:
            p = self.period(a)
            end = self.starts[p] if p < len(self.starts) else b
            e = min(b, end)
            what[p] += e - a
            a = e

    def since_start(self, t: int) -> float:
        p = self.period(t)
        return (t - (self.starts[p - 1] if p else 0)) / 1e6


def name(comm: str, pid: int) -> str:
    """A worker as w<pid's last two digits>, anything else by its comm."""
    return f"w{pid % 100}" if comm == diff.WORKER_COMM else ("idle" if comm.startswith("swapper") else comm[:12])


def kernel_side(text: str, wake: str, start_ns: int, dur_ns: int, quota_ns: int) -> tuple[PeriodStats, list, dict]:
    """The kernel's periods from its trace (ns since the run's start), and the replay's events."""
    hi = start_ns + dur_ns
    evs = sorted(parsed(text, start_ns - 50_000_000, hi + 1) + parsed(wake, start_ns - 50_000_000, hi + 1), key=lambda e: e[0])
    stream = diff.kernel_stream(text, start_ns, hi)
    refills = [e.t_ns for e in stream.events if e.kind == "refill"]
    slack = [e.t_ns for e in stream.events if e.kind == "slack_timer"]
    ps = PeriodStats(refills)
    state: dict[int, tuple] = {}  # pid -> ("run"|"wait", cpu, since) or ("sleep",)
    rr = defaultdict(lambda: 1)  # runtime_remaining per CPU (6.18: 1 ns at the cpu.max write)
    throttled: dict[int, int] = {}  # cpu -> since
    pool = quota_ns
    log = []  # (t, what, cpu, amount, pool)
    timers = sorted([(t, "refill") for t in refills] + [(t, "slack") for t in slack])
    ti = 0

    timeline = []  # (t, cpu, what): switches, wake-ups, migrations of workers
    on_cpu: dict[int, tuple] = {}  # cpu -> (since, what runs)

    def occupancy(cpu: int) -> int:
        return sum(1 for s in state.values() if s[0] in ("run", "wait") and s[1] == cpu)

    def ask(t: int, cpu: int) -> None:
        nonlocal pool
        amount = min(pool, SLICE_NS - rr[cpu]) if pool > 0 else 0
        pool -= amount
        rr[cpu] += amount
        log.append((t, "assign", cpu, amount, pool))
        if rr[cpu] <= 0 and cpu not in throttled:
            throttled[cpu] = t
            ps.throttles[ps.period(t)].append((ps.since_start(t), cpu))
            log.append((t, "throttle", cpu, None, pool))

    def distribute(t: int) -> None:
        nonlocal pool
        for cpu in sorted(throttled, key=throttled.get):
            grant = min(1 - rr[cpu], pool)
            pool -= grant
            rr[cpu] += grant
            if rr[cpu] > 0:
                ps.throttled_iv[cpu].append((throttled[cpu], t))
                if occupancy(cpu):
                    ps.span(ps.throttled_ns, throttled[cpu], t)
                del throttled[cpu]
                log.append((t, "unthrottle", cpu, grant, pool))

    def give_back(t: int, cpu: int) -> None:
        nonlocal pool
        slack_ns = rr[cpu] - MIN_CFS_RQ_RUNTIME_NS
        if slack_ns > 0:
            pool += slack_ns
            rr[cpu] -= slack_ns
            log.append((t, "return", cpu, slack_ns, pool))

    for t, cpu, _comm, _pid, ev, f in evs:
        while ti < len(timers) and timers[ti][0] + start_ns <= t:
            tt, kind = timers[ti]
            ti += 1
            if kind == "refill":
                pool = quota_ns  # burst 0: min(pool + quota, quota)
                log.append((tt, "refill", None, None, pool))
            if kind == "refill" or pool > SLICE_NS:
                distribute(tt)
        t -= start_ns
        if ev == "sched_stat_runtime" and f.get("comm") == diff.WORKER_COMM:
            rr[cpu] -= int(f["runtime"])
            ps.charged[ps.period(t)] += int(f["runtime"])
            if rr[cpu] <= 0 and cpu not in throttled:
                ask(t, cpu)
        elif ev == "sched_switch":
            prev, nxt = int(f["prev_pid"]), int(f["next_pid"])
            kind = "worker" if f.get("next_comm") == diff.WORKER_COMM else ("idle" if nxt == 0 else "other")
            if cpu in on_cpu:
                ps.running[cpu].append((on_cpu[cpu][0], t, on_cpu[cpu][1]))
            on_cpu[cpu] = (t, kind)
            if f.get("prev_comm") == diff.WORKER_COMM or f.get("next_comm") == diff.WORKER_COMM:
                timeline.append((t, cpu, f"{name(f['prev_comm'], prev)}({f.get('prev_state')}) -> {name(f['next_comm'], nxt)}"))
            if f.get("prev_comm") == diff.WORKER_COMM and prev in state:
                ps.span(ps.used, state[prev][2], t)
                state[prev] = ("wait", cpu, t) if f.get("prev_state", "").startswith("R") else ("sleep", cpu)
                if not occupancy(cpu):
                    give_back(t, cpu)
            if f.get("next_comm") == diff.WORKER_COMM:
                was = state.get(nxt)
                if was and was[0] == "wait":
                    ps.waited(was[2], t)
                state[nxt] = ("run", cpu, t)
        elif ev in ("sched_wakeup", "sched_wakeup_new") and f.get("comm") == diff.WORKER_COMM:
            pid, target = int(f["pid"]), int(f["target_cpu"])
            was = state.get(pid, ("sleep",))
            if was[0] == "sleep":
                empty = not occupancy(target)
                state[pid] = ("wait", target, t)
                if len(was) > 1:
                    ps.wakes.append((t, target, was[1]))
                timeline.append((t, target, f"wake w{pid % 100} (on {'empty' if empty else occupancy(target) - 1} queued)"))
                ps.phases[ps.period(t)] += 1
                # check_enqueue_throttle: the first entity on an empty cfs_rq with nothing left.
                if empty and rr[target] <= 0 and target not in throttled:
                    ask(t, target)
        elif ev == "sched_migrate_task" and f.get("comm") == diff.WORKER_COMM:
            pid = int(f["pid"])
            s = state.get(pid)
            if s and s[0] == "wait":
                src = s[1]
                state[pid] = ("wait", int(f["dest_cpu"]), s[2])
                timeline.append((t, int(f["dest_cpu"]), f"migrate w{pid % 100} from CPU{src}"))
                if not occupancy(src):
                    give_back(t, src)
    for cpu, since in throttled.items():
        ps.throttled_iv[cpu].append((since, dur_ns))
        if occupancy(cpu):
            ps.span(ps.throttled_ns, since, dur_ns)
    return ps, log, timeline


def sim_side(records: list[dict], tg: int, dur_ns: int) -> tuple[PeriodStats, list]:
    """The paired simulator's periods from its trace's records (its sleeps are
    exact, so a run phase's wake-up is the previous phase's end plus the sleep)."""
    refills = [r["t_ns"] for r in records if r["kind"] == "refill" and r["tg"] == tg]
    ps = PeriodStats(refills)
    slices = defaultdict(list)
    cur: dict[int, tuple] = {}
    throttled: dict[int, int] = {}
    log = []
    timeline = []
    for r in records:
        t, c = r["t_ns"], r.get("cpu")
        if r["kind"] == "switch":
            if r["tg"] == tg or (c in cur and cur[c][0] is not None):
                timeline.append((t, c, f"{'t%d' % cur[c][0] if c in cur and cur[c][0] is not None else 'other'} -> "
                                       f"{'t%d' % r['arg'] if r['tg'] == tg else ('idle' if r.get('arg') is None else 'other')}"))
            if c in cur and cur[c][0] is not None and t > cur[c][1]:
                slices[cur[c][0]].append((cur[c][1], t, c))
            if c in cur:
                ps.running[c].append((cur[c][1], t, cur[c][2]))
            kind = "worker" if r["tg"] == tg else ("idle" if r.get("arg") is None else "other")
            cur[c] = (r.get("arg") if r["tg"] == tg else None, t, kind)
        elif r["tg"] != tg:
            continue
        elif r["kind"] == "throttle":
            throttled[c] = t
            ps.throttles[ps.period(t)].append((ps.since_start(t), c))
            log.append((t, "throttle", c, None, r["global_ns"]))
        elif r["kind"] == "unthrottle" and c in throttled:
            ps.throttled_iv[c].append((throttled[c], t))
            ps.span(ps.throttled_ns, throttled.pop(c), t)
            log.append((t, "unthrottle", c, None, r["global_ns"]))
        elif r["kind"] in ("assign", "return"):
            log.append((t, r["kind"], c, r.get("arg"), r["global_ns"]))
        elif r["kind"] == "refill":
            log.append((t, "refill", None, None, r["global_ns"]))
    for c, (tid, t, _kind) in cur.items():
        if tid is not None and dur_ns > t:
            slices[tid].append((t, dur_ns, c))
    for c, since in throttled.items():
        ps.throttled_iv[c].append((since, dur_ns))
        ps.span(ps.throttled_ns, since, dur_ns)
    # A run phase is over when the thread's next slice comes at least a whole
    # sleep after it (sleeps are exact) and it has had half a run (a wait
    # can outlast a sleep, never inside the run's first half here); only
    # what exceeds the sleep was waiting.
    half_ns, sleep_ns = 5_000_000, int(SLEEP_US * 1e3)
    for tid, sl in slices.items():
        done, last_end = 0, None
        for a, b, _c in sl:
            ps.span(ps.used, a, b)
            if last_end is None:
                ps.phases[ps.period(a)] += 1
            elif done >= half_ns and a >= last_end + sleep_ns:
                done = 0
                ps.phases[ps.period(last_end + sleep_ns)] += 1
                # Where it ran first: its CPU at the wake-up, unless a pull moved it.
                ps.wakes.append((last_end + sleep_ns, _c, last_cpu))
                if a > last_end + sleep_ns:
                    ps.waited(last_end + sleep_ns, a)
            elif a > last_end:
                ps.waited(last_end, a)
            done += b - a
            last_end, last_cpu = b, _c
    return ps, log, timeline


def show(label: str, p: int, ps: PeriodStats, log: list, timeline: list) -> None:
    """One period's events on one side, in ms from its start."""
    a = ps.starts[p - 1] if p else -10**8  # period 0: from before the start
    b = ps.starts[p] if p < len(ps.starts) else a + 10**9
    print(f"    {label}, period {p}:")
    events = [(t, c, what) for t, c, what in timeline if a <= t < b]
    events += [(t, c, f"{kind} {'' if amt is None else f'{amt / 1e6:.2f} ms '}pool {pool / 1e6:.2f}")
               for t, kind, c, amt, pool in log if a <= t < b and kind != "refill"]
    origin = a if p else 0  # period 0's times are the run's
    for t, c, what in sorted(events, key=lambda e: e[0]):
        print(f"      {(t - origin) / 1e6:7.3f} CPU{'-' if c is None else c} {what}")


STEP_NS = 50_000


def state_at(ivs: list, t: int):
    """The value of the interval list (from, to, value) that holds ``t``."""
    i = bisect.bisect_right(ivs, (t, float("inf"))) - 1
    return ivs[i][2] if i >= 0 and ivs[i][0] <= t < ivs[i][1] else None


def why_waiting(ps: PeriodStats, cpus: int, from_ns: int, to_ns: float = float("inf")) -> dict:
    """The workers' waiting time after ``from_ns`` (sampled every STEP_NS), by
    what the CPUs did meanwhile: a cfs_rq of the group throttled; else a CPU
    idle (a worker stranded while the other CPU has nothing); else both busy,
    with another worker or with anything else (until ``to_ns``)."""
    running = {c: sorted(ps.running[c]) for c in range(cpus)}
    thr = {c: sorted((a, b, True) for a, b in ps.throttled_iv[c]) for c in range(cpus)}
    out = defaultdict(float)
    for a, b in ps.waits:
        t = max(a - a % STEP_NS + STEP_NS, from_ns)
        while t < min(b, to_ns):
            states = [state_at(running[c], t) for c in range(cpus)]
            if any(state_at(thr[c], t) for c in range(cpus)):
                out["a cfs_rq throttled"] += STEP_NS / 1e6
            elif "idle" in states or None in states:
                out["a CPU idle"] += STEP_NS / 1e6
            elif all(s == "worker" for s in states):
                out["both CPUs run workers"] += STEP_NS / 1e6
            else:
                out["a CPU runs another task"] += STEP_NS / 1e6
            t += STEP_NS
    return out


def placements(ps: PeriodStats, cpus: int, from_ns: int) -> dict:
    """Wake-ups after ``from_ns`` by what their previous CPU and the other
    CPU ran then, and where they went (the simulator's: the CPU it ran on first)."""
    running = {c: sorted(ps.running[c]) for c in range(cpus)}
    out = defaultdict(int)
    for t, cpu, prev in ps.wakes:
        if t < from_ns:
            continue
        t -= 1_000  # what ran just before (the woken may switch in at once)
        at_prev = state_at(running[prev], t) or "idle"
        others = {state_at(running[c], t) or "idle" for c in range(cpus) if c != prev}
        if at_prev == "idle":
            out["its previous CPU idle"] += 1
        elif "idle" in others:
            # select_idle_sibling: left on the busy previous CPU, or moved to the idle one.
            out[f"its previous CPU running {'a worker' if at_prev == 'worker' else 'another task'}, the other idle: "
                f"{'left there' if cpu == prev else 'moved'}"] += 1
        else:
            out["both CPUs busy"] += 1
    return out


def fmt_throttles(th: list) -> str:
    return ",".join(f"{x:.1f}@{c}" for x, c in sorted(th)) or "-"


def main(d: Path, wake_path: Path, scenario: Path, show_periods: bool, shown: set) -> None:
    result = json.loads((d / "diff.json").read_text())
    wake = wake_path.read_text(errors="replace")
    text_scenario = scenario.read_text()
    resolved = json.loads(diff._native.validate(text_scenario, []))
    group = resolved["cgroups"][0]
    period_ns, quota_ns = group["period_us"] * 1000, group["quota_us"] * 1000
    dur_ns = round(resolved["duration_s"] * 1e9)
    tot = defaultdict(float)
    for run in result["runs"]:
        n = run["run"]
        text = (d / f"run-{n}.bw.txt").read_text(errors="replace")
        start_ns = round(run["host"]["uptime_s"] * 1e9)
        kp, klog, ktl = kernel_side(text, wake, start_ns, dur_ns, quota_ns)
        host = dict(run["host"])
        host["tick_latency_us"] = run["tick_latency_us"]
        overrides = [f"seed={n}", *diff.start_overrides(resolved, run["start_late_us"])]
        _out, records = diff.paired_sim(text_scenario, overrides, host, 1)
        sp, slog, stl = sim_side(records, 1, dur_ns)
        k, s = run["kernel"], run["sim"]
        print(f"run {n}: cpu.stat throttled kernel {k['nr_throttled']}/{k['nr_periods']} ({k['throttled_usec'] / 1e3:.1f} ms), "
              f"simulator {s['nr_throttled']}/{s['nr_periods']} ({s['throttled_usec'] / 1e3:.1f} ms); usage {k['usage_usec'] / 1e6:.3f} / "
              f"{s['usage_usec'] / 1e6:.3f} s; background {host['background_per_s']:.0f}/s x {host['background_us']:.0f} us, "
              f"work speed {host['work_speed']:.3f}, started {run['start_late_us']:.0f} us late")
        for label, side in (("kernel", kp), ("simulator", sp)):
            why = why_waiting(side, resolved["machine"]["cpus"], period_ns)
            print(f"  {label:9}: waiting runnable after the first period {sum(why.values()):.0f} ms: "
                  + ", ".join(f"{k} {v:.0f}" for k, v in sorted(why.items())))
            for k, v in why.items():
                tot[f"{label} waiting, {k}"] += v
            placed = placements(side, resolved["machine"]["cpus"], period_ns)
            print(f"  {label:9}: wake-ups after the first period {sum(placed.values())}: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(placed.items())))
            for k, v in placed.items():
                tot[f"{label} wake-ups, {k}"] += v
        np_ = min(len(kp.starts), len(sp.starts))
        kthr = [p for p in range(1, np_) if kp.throttles.get(p)]
        sthr = [p for p in range(1, np_) if sp.throttles.get(p)]
        print(f"  replay: {len(kthr)} throttled periods of {np_ - 1} whole ones; simulator {len(sthr)}")
        rows = []
        for p in range(1, np_):
            rows.append((p, kp.used[p] / 1e6, kp.wait[p] / 1e6, kp.throttled_ns[p] / 1e6, kp.throttles.get(p, []),
                         sp.used[p] / 1e6, sp.wait[p] / 1e6, sp.throttled_ns[p] / 1e6, sp.throttles.get(p, []),
                         (sp.starts[p - 1] - kp.starts[p - 1]) / 1e3))
        for i, name in ((1, "kernel"), (5, "simulator")):
            used = [r[i] for r in rows]
            wait = [r[i + 1] for r in rows]
            thr = [r[i + 2] for r in rows]
            first = [min(x for x, _c in r[i + 3]) for r in rows if r[i + 3]]
            print(f"  {name:9}: on CPU {statistics.mean(used):.2f} ms a period, waiting runnable {statistics.mean(wait):.2f} ms, "
                  f"throttled CPU time {statistics.mean(thr):.2f} ms, first throttle at {statistics.median(first) if first else float('nan'):.1f} ms (median)")
            tot[f"{name} used"] += sum(used)
            tot[f"{name} wait"] += sum(wait)
            tot[f"{name} thr"] += len(first)
            tot[f"{name} periods"] += len(rows)
        # Waiting when unthrottled against throttled periods, and what comes first.
        for label, cond in (("periods neither throttled", lambda r: not r[4] and not r[8]),
                            ("kernel only", lambda r: r[4] and not r[8]), ("simulator only", lambda r: r[8] and not r[4]),
                            ("both", lambda r: r[4] and r[8])):
            sel = [r for r in rows if cond(r)]
            if sel:
                print(f"  {label}: {len(sel)}; kernel on CPU {statistics.mean(r[1] for r in sel):.1f} waiting {statistics.mean(r[2] for r in sel):.1f}; "
                      f"simulator on CPU {statistics.mean(r[5] for r in sel):.1f} waiting {statistics.mean(r[6] for r in sel):.1f} ms")
        if show_periods:
            print("  period | kernel: on CPU, waiting, throttled ms, throttles (ms@CPU) | simulator: the same | refill offset us")
            for r in rows:
                print(f"  {r[0]:3d} | {r[1]:6.2f} {r[2]:6.2f} {r[3]:6.2f} {fmt_throttles(r[4]):14} | "
                      f"{r[5]:6.2f} {r[6]:6.2f} {r[7]:6.2f} {fmt_throttles(r[8]):14} | {r[9]:+.0f}")
        for rn, p in sorted(shown):
            if rn == n:
                show("kernel", p, kp, klog, ktl)
                show("simulator", p, sp, slog, stl)
    print("all runs: " + "; ".join(f"{k} {v:.1f}" for k, v in tot.items()))


if __name__ == "__main__":
    shown = {tuple(map(int, a.split(":"))) for a in sys.argv[4:] if ":" in a}  # RUN:PERIOD to list event by event
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), "--periods" in sys.argv, shown)
