"""over14: the start of a guest run, per CPU, from a `throttlelab diff -o DIR` trace
(DIR/run-N.bw.txt, with DIR/diff.json for the run's start) or a ddq12 guest_trace.py
trace (OUT/trace-N.txt.gz, with OUT/run-N.json):
- each worker's start timer (`hrtimer_wakeup` armed by the worker for the common
  start: its expiry, from `hrtimer_start`, where traced) and when it fired, on which CPU;
- the controller (`throttlelab-rea`, SCHED_FIFO at the start) on each CPU: when it ran, how long;
- each worker's first runs (CPU, ms from the start).

  python kernel_start.py DIR/run-N.bw.txt DIR/diff.json N
  python kernel_start.py OUT/trace-N.txt.gz OUT/run-N.json"""
import gzip
import json
import re
import sys

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$")


def events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                yield float(m[4]), int(m[3]), m[5], m[6], m[1], int(m[2])


def start_s(path, n):
    d = json.load(open(path))
    return d["runs"][n - 1]["host"]["uptime_s"] if "runs" in d else d["host"]["uptime_s"]


if __name__ == "__main__":
    trace, meta = sys.argv[1], sys.argv[2]
    t0 = start_s(meta, int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    evs = list(events(trace))
    workers = set()
    for _, _, ev, f, comm, pid in evs:
        if ev == "sched_switch":
            for c, p in re.findall(r"(?:prev|next)_comm=(\S+) (?:prev|next)_pid=(\d+)", f):
                if c == "throttlelab-wor":
                    workers.add(int(p))
    ms = lambda t: (t - t0) * 1e3  # noqa: E731
    armed = {}
    print(f"# start {t0:.6f} s; times in ms from it")
    first = {}
    runs = {}
    for t, cpu, ev, f, comm, pid in evs:
        if ev == "hrtimer_start" and "hrtimer_wakeup" in f:
            timer = re.search(r"hrtimer=(\w+)", f)[1]
            armed[timer] = (int(re.search(r"expires=(\d+)", f)[1]) / 1e9, pid)
        if not -0.002 <= t - t0 <= 0.060:
            continue
        if ev == "hrtimer_expire_entry" and "hrtimer_wakeup" in f:
            timer = re.search(r"hrtimer=(\w+)", f)[1]
            now = int(re.search(r"now=(\d+)", f)[1]) / 1e9
            exp, owner = armed.get(timer, (None, None))
            late = f", {1e3 * (now - exp):.3f} ms after its expiry (armed by pid {owner})" if exp else ""
            print(f"{ms(now):8.3f} CPU {cpu} hrtimer_wakeup fires{late}")
        elif ev == "sched_switch":
            prev = int(re.search(r"prev_pid=(\d+)", f)[1])
            nxt = int(re.search(r"next_pid=(\d+)", f)[1])
            state = re.search(r"prev_state=(\S+)", f)[1]
            pc = re.search(r"prev_comm=(\S+)", f)[1]
            nc = re.search(r"next_comm=(\S+)", f)[1]
            if prev in workers or nxt in workers or "throttlelab-rea" in (pc, nc):
                print(f"{ms(t):8.3f} CPU {cpu} {pc}-{prev} ({state}) -> {nc}-{nxt}")
        elif ev in ("sched_waking", "sched_wakeup", "sched_migrate_task", "str", "str_ret", "wake", "wake_ret") and re.search(r"pid=(\d+)", f) and int(re.search(r"pid=(\d+)", f)[1]) in workers:
            print(f"{ms(t):8.3f} CPU {cpu} {ev} {f}")
