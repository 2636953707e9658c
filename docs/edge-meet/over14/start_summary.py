"""over14: one line per guest run: how the four workers' start went, from ddq12
guest_trace.py traces (OUT/trace-N.txt.gz, OUT/run-N.json; with the `str`/`str_ret`
probes on select_task_rq_fair, or sisutil9's `wake`/`wake_ret`) or `throttlelab diff -o DIR` ones (DIR/run-N.bw.txt,
DIR/diff.json):
- the controller (SCHED_FIFO, `throttlelab-rea`) at the start: its CPU, when it ran (ms
  after the common start) and for how long;
- per worker: when its start wake-up came (`sched_waking`; a diff trace has none, so there
  only the first runs: kernel_start.py shows its hrtimers), the CPU it slept on, the CPU
  `select_task_rq_fair` chose (str_ret / wake_ret), and the CPU it first ran on;
- the spread of the wake-ups (last minus first, ms) and the split of first CPUs.

  python start_summary.py OUT/trace-1.txt.gz OUT/run-1.json [more pairs...]
  python start_summary.py DIR/run-1.bw.txt DIR/diff.json:1 [...]"""
import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_start import events, start_s  # noqa: E402


def summary(trace, meta):
    meta, _, n = meta.partition(":")
    t0 = start_s(meta, int(n or 1))
    evs = [e for e in events(trace) if -0.005 <= e[0] - t0 <= 0.100]
    workers, ctl = set(), None
    for _, _, ev, f, _, _ in evs:
        if ev == "sched_switch":
            for c, p in re.findall(r"(?:prev|next)_comm=(\S+) (?:prev|next)_pid=(\d+)", f):
                if c == "throttlelab-wor":
                    workers.add(int(p))
                elif c == "throttlelab-rea" and ctl is None:
                    ctl = int(p)
    ms = lambda t: round((t - t0) * 1e3, 2)  # noqa: E731
    woke, slept, chose, first_cpu, ctl_run = {}, {}, {}, {}, None
    running = {}
    for t, cpu, ev, f, _, _ in evs:
        pid = re.search(r"\bpid=(\d+)", f)
        pid = int(pid[1]) if pid else None
        if ev == "sched_waking" and pid in workers and pid not in woke and t >= t0:
            woke[pid], slept[pid] = ms(t), int(re.search(r"target_cpu=(\d+)", f)[1])
        elif ev in ("str_ret", "wake_ret") and pid in workers and pid not in chose and t >= t0:
            chose[pid] = int(re.search(r"cpu=(\d+)", f)[1])
        elif ev == "sched_switch":
            nxt = int(re.search(r"next_pid=(\d+)", f)[1])
            prev = int(re.search(r"prev_pid=(\d+)", f)[1])
            if t >= t0 and nxt in workers and nxt not in first_cpu:
                first_cpu[nxt] = (cpu, ms(t))
            if nxt == ctl and t >= t0 and ctl_run is None:
                running[ctl] = (cpu, t)
            if prev == ctl and ctl in running and ctl_run is None:
                c, a = running.pop(ctl)
                ctl_run = (c, ms(a), round((t - a) * 1e3, 2))
    rows = []
    for pid in sorted(workers):
        rows.append(f"pid {pid}: woke {woke.get(pid, '-')} on CPU {slept.get(pid, '-')} -> chose {chose.get(pid, '-')}, "
                    f"first ran on CPU {first_cpu.get(pid, ('-', '-'))[0]} at {first_cpu.get(pid, ('-', '-'))[1]}")
    wakes = [w for w in woke.values()]
    split = collections.Counter(c for c, _ in first_cpu.values())
    per_cpu = {c: min(w for p, w in woke.items() if slept[p] == c) for c in (0, 1) if any(slept[p] == c for p in woke)}
    head = (f"{trace}: first start wake-up CPU 0 {per_cpu.get(0, '-')}, CPU 1 {per_cpu.get(1, '-')} ms; controller {'CPU %d at %.2f ms for %.2f ms' % ctl_run if ctl_run else '-'}; "
            f"wake-ups spread {round(max(wakes) - min(wakes), 2) if wakes else '-'} ms; "
            f"first CPUs {split[0]} + {split[1]}; moved at the start wake-up: "
            f"{sum(1 for p in chose if chose[p] != slept.get(p))} of {len(chose)}")
    return head, rows


if __name__ == "__main__":
    args = sys.argv[1:]
    for trace, meta in zip(args[::2], args[1::2]):
        head, rows = summary(trace, meta)
        print(head)
        for r in rows:
            print("   ", r)
