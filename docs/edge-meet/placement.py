"""Where a trace.sh trace's workers are woken and who pulls them (issue #34).

python placement.py OUT.trace [--from-s 0.5] -> a text summary on stdout.

Per worker wake-up (after every worker has woken, plus --from-s): its
previous CPU (sched_waking's target_cpu is task_cpu(p) before the choice),
the CPU chosen (sched_wakeup's target_cpu) and what both CPUs ran at the
waking. Per migration of a worker, who moved it:
- at the wake-up: between its sched_waking and sched_wakeup;
- a newly idle pull: logged on the destination by the task that is switching
  out (not in softirq), the destination's next switch going to the pulled one
  (sched_balance_newidle in __schedule);
- an idle CPU's pull: logged on an idle destination in softirq
  (sched_balance_softirq: the idle CPU's own periodic balance, or the nohz
  balancer's for it);
- the stopper (migration/N, active balance).
"Stranded": a worker runnable on a CPU that runs another task while the
other CPU is idle; its time is summed by how that wait began and ended.
Two CPUs, as on this host.
"""
import sys
from collections import Counter

from analyse_trace import KV, cpu_time, raw_events as events, switch_fields


def switch(rest):
    prev, pstate, nxt, ncomm, pcomm = switch_fields(rest)
    return prev, pstate, pcomm, nxt, ncomm


def workers(evs):
    """The real backend's worker threads: comm throttlelab-wor with > 0.1 s of CPU."""
    cpu_us, comm = cpu_time([(ts, cpu, pid, name, rest) for ts, cpu, _, pid, _, name, rest in evs])
    return {p for p, t in cpu_us.items() if comm.get(p) == "throttlelab-wor" and t > 1e5}


def main():
    path = sys.argv[1]
    skip_s = float(sys.argv[sys.argv.index("--from-s") + 1]) if "--from-s" in sys.argv else 0.5
    evs = list(events(path))
    W = workers(evs)
    running = {0: 0, 1: 0}  # cpu -> pid (0: idle)
    waking = {}  # pid -> (ts, prev cpu, waker cpu, state of both CPUs)
    rq_of = {}  # a worker's runqueue's CPU
    waiting = {}  # worker -> (since, how it began) while runnable and not running
    pending_pull = {}  # cpu -> (pid, kind) a migration awaiting that CPU's switch
    wakes = Counter()
    migr = Counter()
    stranded = Counter()  # us, by (began, ended)
    stranded_n = Counter()
    episode = {}  # cpu -> [since, ticks of it]: while some worker is stranded on it
    episodes = []  # (ms, ticks, ended by an idle CPU's pull) per episode after t_from
    idle_pull_ran_ago = []  # ms since an idle CPU's pulled worker last ran
    strand_since = {}  # worker -> (ts it became stranded, began)
    woke = set()
    t_from = None
    out_at = {}  # worker -> when it last left a CPU runnable
    went_idle = Counter()  # a CPU went idle while a worker waited on the other
    at_tick = Counter()  # a tick of a CPU with a stranded worker: pulled soon after?
    tick_open = []  # (tick ts, cpu, hot) awaiting an idle CPU's pull within 1 ms
    pull_lat = []  # us from such a tick to the pull

    def run_state(c):
        p = running[c]
        return "idle" if p == 0 else ("a worker" if p in W else "another task")

    def update_strand(ts, ended=None):
        """Open or close each runnable worker's stranded interval at ts."""
        for p, (since, began) in list(waiting.items()):
            c = rq_of.get(p)
            if c is None:
                continue
            is_stranded = running[c] != 0 and running[1 - c] == 0
            if is_stranded and p not in strand_since:
                strand_since[p] = (ts, began)
            elif not is_stranded and p in strand_since:
                close(p, ts, ended or "the other CPU got busy")

    def close(p, ts, how):
        t0, began = strand_since.pop(p)
        if t_from is not None and ts > t_from:
            stranded[(began, how)] += ts - max(t0, t_from)
            stranded_n[(began, how)] += 1

    def episodes_at(ts, how):
        """Open or close each CPU's episode of having a worker stranded."""
        on = {rq_of.get(p) for p in strand_since}
        for c in (0, 1):
            if c in on and c not in episode:
                episode[c] = [ts, 0]
            elif c not in on and c in episode:
                t0, ticks = episode.pop(c)
                if t_from is not None and t0 > t_from:
                    episodes.append(((ts - t0) / 1e3, ticks, how == "by an idle CPU's balance (softirq)"))

    for ts, cpu, comm, lpid, flags, name, rest in evs:
        f = dict(KV.findall(rest)) if name != "sched_switch" else None
        after = t_from is not None and ts > t_from
        while tick_open and ts - tick_open[0][0] > 1000:
            t0, c0, hot0 = tick_open.pop(0)
            at_tick[("hot" if hot0 else "cold") + ", no pull within 1 ms"] += 1
        if name == "hrtimer_expire_entry" and f.get("function") == "tick_nohz_handler" and after:
            there = [p for p in strand_since if rq_of.get(p) == cpu]
            if cpu in episode:
                episode[cpu][1] += 1
            if there:
                hot = all(ts - out_at.get(p, ts - 1e9) < 500 for p in there)
                tick_open.append((ts, cpu, hot))
        if name == "sched_waking" and int(f["pid"]) in W:
            p = int(f["pid"])
            waking[p] = (ts, int(f["target_cpu"]), cpu, (run_state(0), run_state(1)), dict(running))
        elif name == "sched_wakeup" and int(f["pid"]) in W:
            p = int(f["pid"])
            tgt = int(f["target_cpu"])
            woke.add(p)
            if t_from is None and woke == W:
                t_from = ts + skip_s * 1e6
            wts, prev, waker, states, run_at = waking.pop(p, (ts, tgt, cpu, (run_state(0), run_state(1)), dict(running)))
            other = 1 - prev
            if after:
                where = "on its previous CPU" if tgt == prev else "moved to the other CPU"
                key = f"{where}: previous CPU {states[prev]}, other CPU {states[other]}"
                wakes[key] += 1
                wakes[("waker is the previous CPU" if waker == prev else "waker is the other CPU")] += 1
            rq_of[p] = tgt
            if running[tgt] == 0:
                running[tgt] = p  # runs at once (its switch follows)
            else:
                began = "placed on a busy CPU at its wake-up"
                waiting[p] = (ts, began)
        elif name == "sched_migrate_task" and int(f["pid"]) in W:
            p = int(f["pid"])
            dest = int(f["dest_cpu"])
            if p in waking:
                kind = "at the wake-up"
            elif comm.startswith("migration/"):
                kind = "by the stopper (active balance)"
            elif cpu == dest and running[dest] == 0 and "s" in flags[1:3]:
                kind = "by an idle CPU's balance (softirq)"
            elif cpu == dest and "s" not in flags[1:3] and "h" not in flags[1:3]:
                kind = "newly idle pull (in __schedule)"
            else:
                kind = f"other ({comm} on CPU {cpu}, flags {flags})"
            if after:
                migr[kind] += 1
                if kind == "by an idle CPU's balance (softirq)" and p in out_at:
                    idle_pull_ran_ago.append((ts - out_at[p]) / 1e3)
            if kind == "by an idle CPU's balance (softirq)":
                for i, (t0, c0, hot0) in enumerate(tick_open):
                    if c0 == int(f["orig_cpu"]):
                        at_tick[("hot" if hot0 else "cold") + ", pulled within 1 ms"] += 1
                        pull_lat.append(ts - t0)
                        del tick_open[i]
                        break
            if p in strand_since and kind != "at the wake-up":
                close(p, ts, kind)
            rq_of[p] = dest
            episodes_at(ts, kind)
        elif name == "sched_switch":
            prev, pstate, _, nxt, _ = switch(rest)
            running[cpu] = nxt
            if nxt == 0 and prev != 0 and after:
                # sched_balance_newidle found nothing to pull (or did not try):
                # was a worker waiting on the other CPU, and hot (task_hot:
                # it left its CPU less than sysctl_sched_migration_cost ago)?
                there = [p for p in waiting if rq_of.get(p) == 1 - cpu]
                if there:
                    hot = all(ts - out_at.get(p, ts - 1e9) < 500 for p in there)
                    went_idle["a worker waited there, hot (left its CPU < 0.5 ms ago)" if hot else
                              "a worker waited there, cold"] += 1
                else:
                    went_idle["nothing waited there"] += 1
            if prev in W and pstate.startswith("R"):
                waiting[prev] = (ts, "preempted")
                rq_of[prev] = cpu
                out_at[prev] = ts
            if nxt in waiting:
                if nxt in strand_since:
                    close(nxt, ts, "ran on its CPU")
                del waiting[nxt]
        update_strand(ts)
        episodes_at(ts, None)
    print(f"workers: {len(W)} threads; after the first {skip_s} s")
    print("wake-ups:")
    for k, n in sorted(wakes.items()):
        print(f"  {k}: {n}")
    print("migrations of workers:")
    for k, n in migr.most_common():
        print(f"  {k}: {n}")
    print("a CPU switched to idle (no pull): " + ", ".join(f"{k}: {n}" for k, n in sorted(went_idle.items())))
    print("ticks of a CPU with a stranded worker: " + ", ".join(f"{k}: {n}" for k, n in sorted(at_tick.items()))
          + (f" (pulled {min(pull_lat):.0f}-{max(pull_lat):.0f} us after the tick)" if pull_lat else ""))
    print("stranded (runnable on a busy CPU, the other idle), by how it began -> ended: times, ms")
    for k, us in sorted(stranded.items(), key=lambda kv: -kv[1]):
        print(f"  {k[0]} -> {k[1]}: {stranded_n[k]}, {us / 1e3:.1f} ms")
    print(f"  total: {sum(stranded_n.values())}, {sum(stranded.values()) / 1e3:.1f} ms")
    if idle_pull_ran_ago:
        ms = sorted(idle_pull_ran_ago)
        print(f"an idle CPU's balance pulled a worker that last ran, ms before: min {ms[0]:.2f} "
              f"median {ms[len(ms) // 2]:.2f} max {ms[-1]:.2f}; under 0.5 ms (task_hot): {sum(m < 0.5 for m in ms)} of {len(ms)}")
    pulled = sorted(m for m, _, by_idle in episodes if by_idle)
    if pulled:
        print(f"episodes of a CPU with a worker stranded: {len(episodes)}, {sum(m for m, _, _ in episodes):.1f} ms; "
              f"ended by an idle CPU's pull: {len(pulled)}, after ms: min {pulled[0]:.2f} "
              f"median {pulled[len(pulled) // 2]:.2f} max {pulled[-1]:.2f}; at that CPU's tick (0: before its first): "
              + ", ".join(f"{k}: {n}" for k, n in sorted(Counter(t for _, t, by_idle in episodes if by_idle).items())))
        print("  episodes not ended by an idle CPU's pull, by that CPU's ticks in them: "
              + ", ".join(f"{k}: {n}" for k, n in sorted(Counter(t for _, t, by_idle in episodes if not by_idle).items())))


if __name__ == "__main__":
    main()
