"""ddq12: what 6.12 did with its workers' sleeps, from guest_trace.py's traces:
  python kernel_counts.py OUT/trace-1.txt.gz [...]
Per trace: worker sleeps (dequeue_task_fair with DEQUEUE_SLEEP), those delayed
(its return 0), delayed dequeues finished by a pick (dequeue_entity of a worker's
entity with DEQUEUE_DELAYED outside dequeue_task_fair), by a throttle (with
DEQUEUE_SPECIAL), wake-ups that requeued in place (enqueue_task_fair with
ENQUEUE_DELAYED; placed anew when its vruntime moved: DELAY_ZERO, lag > 0),
wake-ups through select_task_rq_fair (and of those, moved), delayed workers
moved by a balance (dequeue_task_fair of a delayed task without DEQUEUE_SLEEP),
throttles (and how many had a delayed task inside: h_nr_delayed > 0)."""
import gzip
import re
import sys
from collections import Counter

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$")
KV = re.compile(r"(\w+)=(\S+)")


def events(path):
    with gzip.open(path, "rt") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                comm, pid, cpu, t, ev, rest = m.groups()
                yield comm, int(pid), int(cpu), float(t), ev, dict(KV.findall(rest)), rest


def note_workers(ev, kv, workers):
    """Add the workers a `sched_switch` names (by comm) to `workers`; whether it was one."""
    if ev != "sched_switch":
        return False
    for side in ("prev", "next"):
        if kv.get(f"{side}_comm", "").startswith("throttlelab-wor"):
            workers.add(int(kv[f"{side}_pid"]))
    return True


def count(path):
    workers = set()
    se_of = {}  # se address -> pid
    in_dtf = {}  # cpu -> pid inside dequeue_task_fair
    etf = {}  # pid -> vr at entry
    c = Counter()
    for comm, pid, cpu, t, ev, kv, rest in events(path):
        if note_workers(ev, kv, workers):
            pass
        elif ev == "dtf":
            p = int(kv["pid"])
            in_dtf[cpu] = p
            se_of[int(kv["p"], 16) + 0x80] = p
            if p in workers:
                fl = int(kv["flags"], 16)
                if fl & 1:
                    c["sleeps"] += 1
                elif kv["delayed"] == "1":
                    c["delayed moved (balance)"] += 1
                else:
                    c["dequeued awake (balance or other)"] += 1
        elif ev == "dtf_ret":
            in_dtf.pop(cpu, None)
            if int(kv["pid"]) in workers and kv["ret"] == "0":
                c["sleeps delayed"] += 1
        elif ev == "de":
            se = int(kv["se"], 16)
            fl = int(kv["flags"], 16)
            if kv["myq"] == "0x0":
                p = se_of.get(se)
                if p in workers and fl & 0x200:
                    if fl & 0x10:
                        c["finished by a throttle"] += 1
                    elif in_dtf.get(cpu) == p:
                        c["finished in dequeue_task_fair"] += 1
                    else:
                        c["finished by a pick"] += 1
            elif fl & 0x200:
                c["group entity finished"] += 1
        elif ev == "de_ret":
            if kv["ret"] == "0" and se_of.get(int(kv["se"], 16)) is None:
                c["group entity delayed"] += 1
        elif ev == "etf":
            p = int(kv["pid"])
            if p in workers:
                fl = int(kv["flags"], 16)
                if fl & 0x200:
                    c["requeued in place"] += 1
                    etf[p] = kv["vr"]
        elif ev == "etf_ret":
            p = int(kv["pid"])
            if p in etf:
                if etf.pop(p) != kv["vr"]:
                    c["requeued, placed anew (lag > 0)"] += 1
        elif ev == "str_ret":
            p = int(kv["pid"])
            if p in workers:
                c["wakes through select_task_rq"] += 1
        elif ev == "throttle" and kv["ok"] == "1":
            c["throttles"] += 1
            if int(kv["nd"]) > 0:
                c["throttles with a delayed task inside"] += 1
        elif ev == "sched_migrate_task" and int(kv["pid"]) in workers:
            c["migrations (sched_migrate_task)"] += 1
    return workers, c


if __name__ == "__main__":
    rows = []
    for p in sys.argv[1:]:
        w, c = count(p)
        rows.append((p, c))
    keys = sorted({k for _, c in rows for k in c})
    for k in keys:
        print(f"{k:40s} " + " ".join(f"{c.get(k, 0):6d}" for _, c in rows))


def sleeps_by_nr(path):
    """The workers' sleeps by the entities on their runqueue (`nr_running`,
    the sleeper included) at `dequeue_entity`: (sleeps, delayed) per count."""
    workers, se_of, pending, by = set(), {}, {}, {}
    for comm, pid, cpu, t, ev, kv, rest in events(path):
        if note_workers(ev, kv, workers):
            pass
        elif ev == "dtf":
            se_of[int(kv["p"], 16) + 0x80] = int(kv["pid"])
        elif ev == "de" and kv["myq"] == "0x0" and int(kv["flags"], 16) & 0x211 == 0x1:
            if se_of.get(int(kv["se"], 16)) in workers:
                pending[int(kv["se"], 16)] = int(kv["nr"])
        elif ev == "de_ret" and int(kv["se"], 16) in pending:
            nr = pending.pop(int(kv["se"], 16))
            a = by.setdefault(nr, [0, 0])
            a[0] += 1
            a[1] += kv["ret"] == "0"
    return by


def sleeps_ran(path):
    """Per worker sleep at nr_running 2: (ran since switched in, ns; delayed; vlag if not delayed)."""
    workers, se_of, pending, since, out = set(), {}, {}, {}, []
    for comm, pid, cpu, t, ev, kv, rest in events(path):
        if ev == "sched_switch":
            for side in ("prev", "next"):
                if kv.get(f"{side}_comm", "").startswith("throttlelab-wor"):
                    workers.add(int(kv[f"{side}_pid"]))
            since[int(kv["next_pid"])] = t
        elif ev == "dtf":
            se_of[int(kv["p"], 16) + 0x80] = int(kv["pid"])
        elif ev == "de" and kv["myq"] == "0x0" and int(kv["flags"], 16) & 0x211 == 0x1:
            p = se_of.get(int(kv["se"], 16))
            if p in workers and kv["nr"] == "2":
                pending[int(kv["se"], 16)] = (t - since.get(p, t)) * 1e9
        elif ev == "de_ret" and int(kv["se"], 16) in pending:
            ran = pending.pop(int(kv["se"], 16))
            out.append((ran, kv["ret"] == "0", int(kv["vlag"]) if kv["ret"] == "1" else None))
    return out
