"""ruc11: the balancer's migrations of worker threads in a sisutil9 guest trace
(6.12), by the thread's state when it was moved:

  python migrations.py TRACE.txt.gz RUN.json

- "asleep": switched out to sleep (prev_state S) and not woken since: 6.12's
  DELAY_DEQUEUE kept it queued (`sched_delayed`, negative lag), so a balance
  could move it; its hrtimer stays on the CPU it slept on, which later
  wakes it (try_to_wake_up from another CPU than task_cpu: wake_affine);
- "runnable": waiting on a runqueue (preempted or woken, not running);
- "at wake-up": between its sched_waking and sched_wakeup (select_task_rq).
Then the wake-ups whose waking CPU was not the task's CPU, and how many of
those followed an "asleep" migration.
"""
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_wakes import WORKER, events  # noqa: E402 (the trace reader)


def main() -> None:
    trace, run = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    start, dur = run["host"]["uptime_s"], run["duration_s"]
    state = {}  # pid -> "asleep" | "runnable" | "running" | "waking"
    moved_asleep = set()
    mig = Counter()
    wakes = Counter()
    for ts, cpu, ev, kv, _rest in events(trace):
        t = (ts - start) * 1e3
        inrun = 100 <= t <= dur * 1e3
        if ev == "sched_switch":
            if kv["prev_comm"].startswith(WORKER):
                state[int(kv["prev_pid"])] = "asleep" if kv["prev_state"] in ("S", "D") else "runnable"
            if kv["next_comm"].startswith(WORKER):
                state[int(kv["next_pid"])] = "running"
        elif ev == "sched_waking" and kv.get("comm", "").startswith(WORKER):
            pid = int(kv["pid"])
            state[pid] = "waking"
            if inrun:
                other = int(kv["target_cpu"]) != cpu  # target_cpu here: task_cpu before select
                wakes[("woken from another CPU" if other else "woken from its CPU",
                       "after an asleep migration" if pid in moved_asleep else "")] += 1
            moved_asleep.discard(pid)
        elif ev == "sched_wakeup" and kv.get("comm", "").startswith(WORKER):
            state[int(kv["pid"])] = "runnable"
        elif ev == "sched_migrate_task" and kv.get("comm", "").startswith(WORKER):
            pid = int(kv["pid"])
            s = state.get(pid, "?")
            if s == "asleep":
                moved_asleep.add(pid)
            if inrun:
                mig["at wake-up" if s == "waking" else s] += 1
    print(f"{trace}: worker migrations after 100 ms: " + ", ".join(f"{k} {v}" for k, v in sorted(mig.items())))
    print("  wake-ups: " + ", ".join(f"{a}{' ' + b if b else ''} {v}" for (a, b), v in sorted(wakes.items())))


if __name__ == "__main__":
    main()
