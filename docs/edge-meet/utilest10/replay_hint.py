"""SIS_UTIL's hint, replayed from a 6.12 guest's trace (sisutil9's hold), two ways:

  python replay_hint.py TRACE.txt.gz RUN.json

The trace has every switch, wake-up (with its target CPU), migration, throttle
and LLC-domain balance (`sched_balance_rq`, with `nr_idle_scan` before and
after). From the switches this rebuilds each task's PELT signals (util_avg,
runnable_avg: continuous decay, y^32 = 1/2 per 1024 us) and its `util_est`
(`util_est_update` at a sleep's dequeue, 6.12's rules), each CPU's util_avg
(the tasks attached to it, blocked ones too) and util_est (the tasks enqueued
on it: woken and not yet asleep; a throttled group's tasks stay enqueued, as
`throttle_cfs_rq` dequeues only the group's entity), and at each periodic or
idle balance of the LLC domain the hint `update_idle_cpu_scan` would write
from the CPUs' `cpu_util` summed:
- "avg": min(util_avg, 1024) per CPU, what the simulator's PELT of a CPU's
  running time gives (its sum is the same: PELT is linear);
- "avg+est": min(max(util_avg, util_est), 1024) per CPU, the kernel's
  `cpu_util(cpu, NULL, -1, 0)` with UTIL_EST.
It prints how often each agrees with the hint the kernel wrote.
"""
import gzip
import json
import re
import sys
from collections import Counter
from pathlib import Path

LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>\d+\.\d+):\s+(?P<ev>[\w]+):\s*(?P<rest>.*)$")
KV = re.compile(r"(\w+)=(\S+)")
HALF_LIFE_US = 32 * 1024.0
MARGIN = 1024 // 100  # UTIL_EST_MARGIN
PCT = 117  # the LLC domain's imbalance_pct


def decay(dt_us: float) -> float:
    return 0.5 ** (dt_us / HALF_LIFE_US)


class Task:
    def __init__(self, cpu: int, t: float):
        self.cpu, self.t = cpu, t
        self.util = self.runnable_avg = 0.0
        self.running = self.queued = False
        self.est = 0

    def advance(self, t: float) -> None:
        y = decay(t - self.t)
        self.util = self.util * y + (1024.0 * (1 - y) if self.running else 0.0)
        self.runnable_avg = self.runnable_avg * y + (1024.0 * (1 - y) if self.queued else 0.0)
        self.t = t

    def sleep(self) -> None:
        """`util_est_update(task_sleep)` at the sleep's dequeue."""
        dequeued = int(self.util)
        if self.est <= dequeued:
            self.est = dequeued
        elif self.est - dequeued >= MARGIN and dequeued + MARGIN >= self.runnable_avg:
            self.est -= (self.est - dequeued) >> 2


class Tasks(dict):
    """The tasks by pid, kept up to date by a trace's switches, wake-ups and
    migrations (``apply``)."""

    def task(self, pid: int, cpu: int, t: float) -> Task:
        if pid not in self:
            self[pid] = Task(cpu, t)
        return self[pid]

    def apply(self, t: float, cpu: int, ev: str, kv: dict) -> None:
        if ev == "sched_switch":
            prev, nxt = int(kv["prev_pid"]), int(kv["next_pid"])
            if prev:
                p = self.task(prev, cpu, t)
                p.advance(t)
                p.running = False
                if kv["prev_state"] not in ("R", "R+"):
                    p.queued = False
                    p.sleep()
            if nxt:
                n = self.task(nxt, cpu, t)
                n.advance(t)
                n.running = n.queued = True
                n.cpu = cpu
        elif ev in ("sched_wakeup", "sched_wakeup_new"):
            p = self.task(int(kv["pid"]), int(kv["target_cpu"]), t)
            p.advance(t)
            p.queued, p.cpu = True, int(kv["target_cpu"])
        elif ev == "sched_migrate_task":
            p = self.task(int(kv["pid"]), int(kv["dest_cpu"]), t)
            p.advance(t)
            p.cpu = int(kv["dest_cpu"])

    def util_avgs(self, t: float) -> list[float]:
        """Each CPU's util_avg at ``t`` (the tasks attached to it), capped."""
        per = [0.0, 0.0]
        for p in self.values():
            p.advance(t)
            per[p.cpu] += p.util
        return [min(v, 1024.0) for v in per]


def events(trace: Path):
    """``(t in us, cpu, event, fields)`` of a trace's lines."""
    with gzip.open(trace, "rt", errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                yield float(m["ts"]) * 1e6, int(m["cpu"]), m["ev"], dict(KV.findall(m["rest"]))


def hint(sum_util: float, llc_weight: int = 2) -> int:
    x = int(sum_util) // llc_weight
    tmp = min(x * x * PCT * PCT // (10000 * 1024), 1024)
    return (1024 - tmp) * llc_weight // 1024


def main() -> None:
    trace, run = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    start, dur = run["host"]["uptime_s"], run["duration_s"]
    tasks = Tasks()
    agree = {"avg": Counter(), "avg+est": Counter()}
    open_lb = {}
    sums = {"avg": [], "avg+est": []}

    def cpu_utils(t: float):
        avg, est = tasks.util_avgs(t), [0, 0]
        for p in tasks.values():
            if p.queued:
                est[p.cpu] += p.est
        return avg, [min(max(a, e), 1024.0) for a, e in zip(avg, est)]

    for t, cpu, ev, kv in events(trace):
        tasks.apply(t, cpu, ev, kv)
        if ev == "lb" and kv.get("w") == "2":
            open_lb[cpu] = (t, int(kv["idle"]), cpu_utils(t))
        elif ev == "lb_ret" and kv.get("w") == "2" and cpu in open_lb:
            t0, idle, (avg, full) = open_lb.pop(cpu)
            if idle == 2 or not (0.1 <= (t0 / 1e6 - start) <= dur):
                continue  # a newly idle balance does not write the hint
            written = int(kv["scan"])
            for name, utils in (("avg", avg), ("avg+est", full)):
                s = sum(utils)
                sums[name].append(s)
                agree[name][(hint(s), written)] += 1
    for name, c in agree.items():
        n = sum(c.values())
        same = sum(v for (a, b), v in c.items() if a == b)
        s = sorted(sums[name])
        print(f"{name:8s}: {same} of {n} balances give the hint the kernel wrote; "
              f"sum_util deciles 1/5/9 {s[len(s) // 10]:.0f} / {s[len(s) // 2]:.0f} / {s[9 * len(s) // 10]:.0f}; "
              "(replayed, written): " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))


if __name__ == "__main__":
    main()
