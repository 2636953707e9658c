"""ddq12: finer reads of guest_trace.py's traces (kernel.txt holds their output):
  python kernel_more.py nr|lag|ran|stints OUT/trace-1.txt.gz [...]
nr: worker sleeps by nr_running at dequeue_entity, [sleeps, delayed];
lag: the vlag enqueue_task_fair placed at the workers' wake-ups through select_task_rq;
ran: sleeps at nr_running 2, time since switched in (ms quartiles), delayed or not,
     and the vlag (ms) of those not delayed;
stints: workers switched out runnable, ms since switched in, and what ran next."""
import statistics as st
import sys
from collections import Counter

from kernel_counts import events, note_workers, sleeps_by_nr, sleeps_ran


def q(xs, n=4):
    return [round(x / 1e6, 2) for x in (st.quantiles(xs, n=n) if len(xs) > 1 else xs)]


def lags(path):
    workers, out = set(), []
    for comm, pid, cpu, t, ev, kv, rest in events(path):
        if note_workers(ev, kv, workers):
            pass
        elif ev == "etf" and int(kv["pid"]) in workers and int(kv["flags"], 16) & 0x201 == 0x1:
            out.append(int(kv["vlag"]))
    pos = sorted(l for l in out if l > 0)
    return (f"wake-ups placed: {len(out)}, lag > 0: {len(pos)}, = 0: {sum(l == 0 for l in out)}, "
            f"< 0: {sum(l < 0 for l in out)}; positive lags' median {pos[len(pos) // 2] / 1e3 if pos else 0:.0f} us, max {max(out) / 1e3:.0f} us")


def stints(path):
    since, pre, nxt = {}, [], Counter()
    for comm, pid, cpu, t, ev, kv, rest in events(path):
        if ev == "sched_switch":
            p = int(kv["prev_pid"])
            if kv["prev_comm"].startswith("throttlelab-wor") and kv["prev_state"] in ("R", "R+") and p in since:
                pre.append((t - since[p]) * 1e9)
                nxt["worker" if kv["next_comm"].startswith("throttlelab-wor") else kv["next_comm"][:10]] += 1
            since[int(kv["next_pid"])] = t
    return f"{len(pre)} switched out runnable, ms deciles {q(pre, 10)}; next: {nxt.most_common(5)}"


def ran(path):
    rows = sleeps_ran(path)
    d, e = [r for r in rows if r[1]], [r for r in rows if not r[1]]
    return (f"delayed {len(d)} ran {q([r[0] for r in d])} | eligible {len(e)} ran {q([r[0] for r in e])} "
            f"lag {q([r[2] for r in e])}")


if __name__ == "__main__":
    what = sys.argv[1]
    for p in sys.argv[2:]:
        r = {"nr": lambda p: sorted(sleeps_by_nr(p).items()), "lag": lags, "ran": ran, "stints": stints}[what](p)
        print(f"{p}: {r}")
