"""start14: how each host run's four workers started, from `throttlelab diff -o DIR`
traces (DIR/run-N.bw.txt, with sched_waking, sched_wakeup and sched_migrate_task since
start14; DIR/diff.json for each run's start, `host.uptime_s`). One line per run:
- per CPU, its first start wake-up (`sched_waking` of a worker, ms after the start);
- the controller (`throttlelab-rea`, SCHED_FIFO at the start), if it woke within 20 ms
  of the start: its CPU, when it was queued (`sched_wakeup`), when it ran (`sched_switch`
  in; "-" where the trace lost that line) and when it left, in ms after the start;
- the start wake-ups moved (`sched_migrate_task` between a worker's `sched_waking` and
  its `sched_wakeup`), and each worker's first CPU (`sched_switch`): the split.
Then the counts of 2 + 2 against 1 + 3 / 3 + 1.

  python host_start.py DIR [DIR...]"""
import collections
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "over14"))
from kernel_start import events  # noqa: E402

WINDOW_S = 0.020  # the start's events: this long after the common start


def run(trace, t0):
    evs = [e for e in events(trace) if -0.005 <= e[0] - t0 <= WINDOW_S]
    workers, ctl = set(), set()
    for _, _, ev, f, _, _ in evs:
        if ev == "sched_switch":
            for c, p in re.findall(r"(?:prev|next)_comm=(\S+) (?:prev|next)_pid=(\d+)", f):
                (workers if c == "throttlelab-wor" else ctl if c == "throttlelab-rea" else set()).add(int(p))
    ms = lambda t: round((t - t0) * 1e3, 3)  # noqa: E731
    woke, slept, moved, first, queued = {}, {}, {}, {}, {}
    ctl_runs, running, ctl_woke = [], {}, []
    for t, cpu, ev, f, _, _ in evs:
        pid = re.search(r"\bpid=(\d+)", f)
        pid = int(pid[1]) if pid else None
        if t < t0:
            continue
        if ev == "sched_wakeup" and pid in ctl and not ctl_woke:
            ctl_woke.append((int(re.search(r"target_cpu=(\d+)", f)[1]), ms(t)))
        elif ev == "sched_waking" and pid in workers and pid not in woke:
            woke[pid], slept[pid] = ms(t), int(re.search(r"target_cpu=(\d+)", f)[1])
        elif ev == "sched_migrate_task" and pid in woke and pid not in queued:
            moved[pid] = (int(re.search(r"orig_cpu=(\d+)", f)[1]), int(re.search(r"dest_cpu=(\d+)", f)[1]))
        elif ev == "sched_wakeup" and pid in woke and pid not in queued:
            queued[pid] = (ms(t), int(re.search(r"target_cpu=(\d+)", f)[1]))
        elif ev == "sched_switch":
            nxt = int(re.search(r"next_pid=(\d+)", f)[1])
            prev = int(re.search(r"prev_pid=(\d+)", f)[1])
            if nxt in workers and nxt not in first:
                first[nxt] = (cpu, ms(t))
            if nxt in ctl:
                running[cpu] = t
            if prev in ctl and not ctl_runs and ctl_woke:
                a = running.pop(cpu, None)
                ctl_runs.append((cpu, ctl_woke[0][1], ms(a) if a else "-", ms(t)))
    per_cpu = {c: min(w for p, w in woke.items() if slept[p] == c) for c in set(slept.values())}
    split = collections.Counter(c for c, _ in first.values())
    return {
        "first_wakeup_ms": {c: per_cpu[c] for c in sorted(per_cpu)},
        "controller": ctl_runs,
        "moved": {p: moved[p] for p in sorted(moved)},
        "wakeup_us": sorted(round((queued[p][0] - woke[p]) * 1e3) for p in queued),
        "first_cpus": {p: first[p][0] for p in sorted(first)},
        "split": f"{split[0]} + {split[1]}",
    }


def main(dirs):
    total = collections.Counter()
    for d in dirs:
        meta = json.load(open(Path(d) / "diff.json"))
        for n, r in enumerate(meta["runs"], 1):
            trace = Path(d) / f"run-{n}.bw.txt"
            if not trace.exists():
                continue
            out = run(str(trace), r["host"]["uptime_s"])
            total[(d, out["split"])] += 1
            c = out["controller"][0][0] if out["controller"] else None
            total[(d, f"{out['split']}, controller on CPU {c}, moved " + ",".join(f"{a}->{b}" for a, b in out["moved"].values()))] += 1
            print(f"{d} run {n}: first wake-up per CPU {out['first_wakeup_ms']} ms; controller (CPU, queued, ran, left) {out['controller']}; "
                  f"moved {out['moved']}; waking->wakeup {out['wakeup_us']} us; first CPUs {out['first_cpus']}: {out['split']}")
    for (d, split), n in sorted(total.items()):
        print(f"{d}: {split} in {n} runs")


if __name__ == "__main__":
    main(sys.argv[1:])
