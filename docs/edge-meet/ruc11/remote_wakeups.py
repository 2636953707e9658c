"""ruc11: why sisutil9's hint_trace.py missed the kernel's moves. A worker's
sched_waking is on the waking CPU; its sched_wakeup is emitted by
ttwu_do_wakeup where the task is activated, which for a wake-up onto another
idle CPU of the LLC is that CPU (TTWU_QUEUE: ttwu_queue_cond queues it on the
target's wake list). hint_trace.py closed a wake-up only on a sched_wakeup on
the waking CPU, so it dropped those:

  python remote_wakeups.py TRACE.txt.gz RUN.json

Counts, after the first 100 ms: wake-ups by where select_task_rq_fair sent
them (the waking CPU, or another) and on which CPU sched_wakeup came.
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
    open_ = {}
    c = Counter()
    for ts, cpu, ev, kv, _rest in events(trace):
        t = (ts - start) * 1e3
        if ev == "sched_waking" and kv.get("comm", "").startswith(WORKER):
            open_[int(kv["pid"])] = (t, cpu)
        elif ev == "sched_wakeup" and int(kv.get("pid", -1)) in open_:
            t0, waker = open_.pop(int(kv["pid"]))
            if 100 <= t0 <= dur * 1e3:
                target = int(kv["target_cpu"])
                c[("placed on the waking CPU" if target == waker else "placed on another CPU",
                   "sched_wakeup on the waking CPU" if cpu == waker else "sched_wakeup on the target CPU")] += 1
    print(f"{trace}: " + "; ".join(f"{a}, {b}: {v}" for (a, b), v in sorted(c.items())))


if __name__ == "__main__":
    main()
