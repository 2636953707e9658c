"""At each worker wake-up that finds its previous CPU running another worker and
the other CPU idle (sisutil9's trace), the hint the kernel had stored against
the hint three models give from the replayed utilization (replay_hint.py):

  python replay_wakes.py TRACE.txt.gz RUN.json

- "now": computed at the wake-up (the simulator's engine today);
- "first tick": written at the first jiffy boundary of each CPU's idle
  interval, from the sum then (the idle CPU's tick that NOHZ has not stopped
  yet), else kept;
- "first tick + busy": the same, and at each busy periodic balance the trace
  shows (the kernel's own times).
"""
import gzip
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

here = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("replay_hint", here / "replay_hint.py")
rh = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rh)
TICK_US = 4000.0  # HZ=250
WORKER = "throttlelab-wor"


def main() -> None:
    trace, run = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    start = run["host"]["uptime_s"] * 1e6
    tasks: dict[int, rh.Task] = {}
    curr = {0: 0, 1: 0}
    idle_since = {}
    kernel_hint = None
    model = {"first tick": None, "first tick + busy": None}
    pending = {}  # cpu -> jiffy boundary of its idle interval's first tick, not yet written
    last_t = 0.0
    result = Counter()

    def task(pid, cpu, t):
        if pid not in tasks:
            tasks[pid] = rh.Task(cpu, t)
        return tasks[pid]

    def sum_at(t):
        per = [0.0, 0.0]
        for p in tasks.values():
            p.advance(t)
            per[p.cpu] += p.util
        return sum(min(v, 1024.0) for v in per)

    def catch_up(t):
        """Writes of the first idle tick due before t (the state is constant since the last event)."""
        for cpu, j in sorted(pending.items(), key=lambda kv: kv[1]):
            if j <= t:
                h = rh.hint(sum_at(j))
                for k in model:
                    model[k] = h
                del pending[cpu]

    with gzip.open(trace, "rt", errors="replace") as f:
        for line in f:
            m = rh.LINE.match(line)
            if not m:
                continue
            t = float(m["ts"]) * 1e6
            cpu, ev, kv = int(m["cpu"]), m["ev"], dict(rh.KV.findall(m["rest"]))
            catch_up(t)
            if ev == "sched_switch":
                prev, nxt = int(kv["prev_pid"]), int(kv["next_pid"])
                if prev:
                    p = task(prev, cpu, t)
                    p.advance(t)
                    p.running = False
                    if kv["prev_state"] not in ("R", "R+"):
                        p.queued = False
                        p.sleep()
                if nxt:
                    n = task(nxt, cpu, t)
                    n.advance(t)
                    n.running = n.queued = True
                    n.cpu = cpu
                    pending.pop(cpu, None)
                elif curr[cpu] != 0:
                    pending[cpu] = (t // TICK_US + 1) * TICK_US  # the next jiffy boundary
                curr[cpu] = nxt
            elif ev in ("sched_wakeup", "sched_wakeup_new"):
                p = task(int(kv["pid"]), int(kv["target_cpu"]), t)
                p.advance(t)
                p.queued, p.cpu = True, int(kv["target_cpu"])
            elif ev == "sched_migrate_task":
                p = task(int(kv["pid"]), int(kv["dest_cpu"]), t)
                p.advance(t)
                p.cpu = int(kv["dest_cpu"])
            elif ev == "lb_ret" and kv.get("w") == "2":
                kernel_hint = int(kv["scan"])
                if kv["idle"] == "0":
                    model["first tick + busy"] = rh.hint(sum_at(t))
            elif ev == "sched_waking" and kv.get("comm", "").startswith(WORKER) and t - start > 1e5:
                pid = int(kv["pid"])
                if pid not in tasks:
                    continue
                prev = tasks[pid].cpu
                other = 1 - prev
                if curr[prev] != 0 and curr[prev] != pid and curr[other] == 0 and kernel_hint is not None:
                    result[("now", rh.hint(sum_at(t)) == kernel_hint)] += 1
                    for k, v in model.items():
                        result[(k, v == kernel_hint)] += 1
                    result[("kernel hint", kernel_hint)] += 1
    for k in ("kernel hint",):
        print(f"{trace.name}: the kernel's stored hint at these wake-ups: " + ", ".join(f"{h}: {v}" for (kk, h), v in sorted(result.items()) if kk == k))
    for k in ("now", "first tick", "first tick + busy"):
        print(f"  {k:18s}: {result[(k, True)]} of {result[(k, True)] + result[(k, False)]} equal to the kernel's")


if __name__ == "__main__":
    main()
