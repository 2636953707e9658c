"""ruc11: every worker wake-up in a sisutil9 guest trace (6.12, kprobes on
select_task_rq_fair with p->recent_used_cpu before and after), with the path
it took:

  python kernel_wakes.py TRACE.txt.gz RUN.json [--list]

- "select": try_to_wake_up called select_task_rq_fair (the task was off its
  runqueue): prev, recent_used_cpu before/after, the CPU chosen;
- "runnable": no select_task_rq_fair between sched_waking and sched_wakeup:
  ttwu_runnable found the task still queued (6.12's DELAY_DEQUEUE keeps a
  task that sleeps with negative lag on its runqueue, `sched_delayed`), so
  it is woken where it is and recent_used_cpu is not touched.

Counted after the first 100 ms, within the run, by what the previous and the
other CPU ran at the wake-up (as hint_trace.py): and, for the wake-ups whose
previous CPU ran another worker while the other CPU idled, how many stayed.
"""
import argparse
import gzip
import json
import re
from collections import Counter
from pathlib import Path

LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>\d+\.\d+):\s+(?P<ev>[\w]+):\s*(?P<rest>.*)$")
KV = re.compile(r"(\w+)=(\S+)")
WORKER = "throttlelab-wor"


def events(path: Path):
    with gzip.open(path, "rt", errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                yield float(m["ts"]), int(m["cpu"]), m["ev"], dict(KV.findall(m["rest"])), m["rest"]


def wakes(trace: Path, start: float, dur: float):
    """Each worker wake-up: dict with t (ms), pid, waker CPU, prev, state, path, recent, chosen."""
    curr = {}
    last_cpu = {}  # pid -> the CPU it last ran on (switch out)
    open_ = {}  # pid -> the wake-up under way
    waking = {}  # cpu -> the pid it is waking
    out = []
    for ts, cpu, ev, f, _rest in events(trace):
        t = (ts - start) * 1e3
        if ev == "sched_switch":
            nxt, prv = int(f["next_pid"]), int(f["prev_pid"])
            kind = "idle" if nxt == 0 else ("worker" if f["next_comm"].startswith(WORKER) else "other")
            curr[cpu] = (kind, nxt)
            last_cpu[prv] = cpu
        elif ev == "sched_migrate_task":
            last_cpu[int(f["pid"])] = int(f["dest_cpu"])
        elif ev == "sched_waking" and f.get("comm", "").startswith(WORKER):
            pid = int(f["pid"])
            open_[pid] = {"t": t, "pid": pid, "waker": cpu, "path": "runnable",
                          "state": {c: curr.get(c, ("?", -1)) for c in (0, 1)}, "last": last_cpu.get(pid)}
            waking[cpu] = pid
        elif ev == "wake" and waking.get(cpu) == int(f["pid"]) and int(f["pid"]) in open_:
            w = open_[int(f["pid"])]
            w.update(path="select", prev=int(f["prev"]), recent=int(f["recent"]), flags=int(f["flags"]))
        elif ev == "wake_ret" and waking.get(cpu) == int(f["pid"]) and int(f["pid"]) in open_:
            w = open_[int(f["pid"])]
            w.update(chosen=int(f["cpu"]), recent_after=int(f["recent"]))
        elif ev == "sched_wakeup" and int(f["pid"]) in open_:
            # On the target CPU: with TTWU_QUEUE a remote wake-up's sched_wakeup
            # comes from the target's wake list, not from the waking CPU.
            w = open_.pop(int(f["pid"]))
            w["target"] = int(f["target_cpu"])
            w.setdefault("prev", w["last"] if w["path"] == "runnable" else None)
            if 100 <= w["t"] <= dur * 1e3:
                out.append(w)
    return out


def classify(w) -> str:
    prev = w["prev"]
    if prev is None:
        return "?"
    at_prev, at_other = w["state"][prev], w["state"][1 - prev]
    if at_prev[1] == w["pid"]:
        return "prev runs itself"
    if at_prev[0] == "idle":
        return "prev idle"
    if at_other[0] == "idle":
        return "prev busy, other idle"
    return "both busy"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", type=Path)
    ap.add_argument("run", type=Path)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    run = json.loads(a.run.read_text())
    ws = wakes(a.trace, run["host"]["uptime_s"], run["duration_s"])
    c = Counter()
    for w in ws:
        key = classify(w)
        moved = "moved" if w["target"] != w["prev"] else "left"
        how = w["path"]
        if how == "select" and w["waker"] != w["prev"]:
            how += ", woken from the other CPU"
        elif how == "select" and moved == "moved":
            how += ", recent" if w["target"] == w["recent"] else ", scan"
        if how == "select":
            how += f", recent {'=other' if w['recent'] != w['prev'] else '=prev'}"
        c[(key, how, moved)] += 1
        if a.list:
            print(f"{w['t']:9.3f} pid {w['pid']} waker CPU{w['waker']} {w['path']:8} prev {w['prev']} "
                  f"[{w['state'][0][0]},{w['state'][1][0]}] recent {w.get('recent')}->{w.get('recent_after')} -> {w['target']} ({moved})")
    print(f"{a.trace}: {len(ws)} worker wake-ups after 100 ms")
    for k, v in sorted(c.items()):
        print(f"  {v:4d}  {' / '.join(k)}")


if __name__ == "__main__":
    main()
