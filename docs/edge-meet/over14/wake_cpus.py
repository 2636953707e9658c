"""over14: every select_task_rq_fair of a worker in ddq12 guest_trace.py traces (the `str`
probe: the CPU it ran on, the wakee's prev_cpu), counted: run on the wakee's own CPU
(wake_affine skipped) or on another; and how many chose another CPU than prev.
  python wake_cpus.py OUT/trace-1.txt.gz [...]"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_start import events  # noqa: E402

for path in sys.argv[1:]:
    workers, at_prev, elsewhere, moved, prev_of = set(), 0, 0, 0, {}
    evs = list(events(path))
    for _, _, ev, f, _, _ in evs:
        if ev == "sched_switch":
            workers |= {int(p) for c, p in re.findall(r"(?:prev|next)_comm=(\S+) (?:prev|next)_pid=(\d+)", f) if c == "throttlelab-wor"}
    for _, cpu, ev, f, _, _ in evs:
        if ev not in ("str", "str_ret", "wake", "wake_ret"):
            continue
        pid = int(re.search(r"pid=(\d+)", f)[1])
        if pid not in workers:
            continue
        if ev in ("str", "wake"):
            prev = int(re.search(r"prev=(\d+)", f)[1])
            prev_of[pid] = prev
            at_prev += cpu == prev
            elsewhere += cpu != prev
        elif pid in prev_of:
            moved += int(re.search(r"cpu=(\d+)", f)[1]) != prev_of.pop(pid)
    print(f"{path}: {at_prev + elsewhere} worker wake-ups; on the wakee's own CPU {at_prev}, elsewhere {elsewhere}; "
          f"placed on another CPU than prev {moved}")
