"""over14: each CPU's switches between the workers (w0-w3, by pid order), idle and the
controller in a guest trace's first milliseconds, the simulator's simtimeline.py's form,
with the start wake-ups' migrations:
  python kernel_timeline.py OUT/trace-N.txt.gz OUT/run-N.json [TO_MS]"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_start import events, start_s  # noqa: E402

trace, meta = sys.argv[1], sys.argv[2]
to_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 150
t0 = start_s(meta, 1)
evs = [e for e in events(trace) if 0 <= e[0] - t0 <= to_ms / 1e3]
workers = sorted({int(p) for _, _, ev, f, _, _ in events(trace) if ev == "sched_switch"
                  for c, p in re.findall(r"(?:prev|next)_comm=(\S+) (?:prev|next)_pid=(\d+)", f) if c == "throttlelab-wor"})
# the run's workers are the last four pids seen (the probe's come before)
workers = workers[-4:]
name = {p: f"w{i}" for i, p in enumerate(workers)}
for t, cpu, ev, f, _, _ in evs:
    ms = (t - t0) * 1e3
    if ev == "sched_switch":
        prev, nxt = (int(re.search(rf"{k}_pid=(\d+)", f)[1]) for k in ("prev", "next"))
        pc, nc = (re.search(rf"{k}_comm=(\S+)", f)[1] for k in ("prev", "next"))
        if prev in name or nxt in name or "throttlelab-rea" in (pc, nc):
            who = lambda p, c: name.get(p, "idle" if p == 0 else ("ctl" if c == "throttlelab-rea" else c))  # noqa: E731
            state = re.search(r"prev_state=(\S+)", f)[1]
            print(f"{ms:9.3f} CPU {cpu} {who(prev, pc)}({state}) -> {who(nxt, nc)}")
    elif ev == "sched_migrate_task":
        pid = int(re.search(r"pid=(\d+)", f)[1])
        if pid in name:
            orig, dest = re.search(r"orig_cpu=(\d+) dest_cpu=(\d+)", f).groups()
            print(f"{ms:9.3f} migrate {name[pid]} {orig} -> {dest}")
