"""Read a guest_trace.py trace (tracefs text, kprobes of group sis and the
sched tracepoints) of one run:

  python hint_trace.py OUT/trace-N.txt.gz OUT/run-N.json [--list]

- SIS_UTIL's hint: every balance of the LLC domain (sched_balance_rq, span 2)
  with its CPU, idle type and the hint before and after (the write, when it
  changed); how many a second from each kind of balance;
- every wake-up of a worker thread (sched_waking .. sched_wakeup on the CPU
  that woke it): its previous CPU, what each CPU ran then, the hint then,
  the CPUs idle_cpu() was asked about inside select_task_rq_fair (the order
  select_idle_sibling asks: target, then recent_used_cpu, then
  select_idle_cpu's scan), and where it went;
- the table rs4t8 and sisutil8 kept: wake-ups whose previous CPU ran another
  worker while the other CPU was idle, left there or moved, by the hint.

Times are ms from the run's start (host.uptime_s of the run's document).
"""
import argparse
import gzip
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>\d+\.\d+):\s+(?P<ev>[\w]+):\s*(?P<rest>.*)$")
KV = re.compile(r"(\w+)=(\S+)")
WORKER = "throttlelab-wor"
IDLE_TYPE = {0: "busy", 1: "idle", 2: "newly idle"}


def fields(rest: str) -> dict:
    return {k: v for k, v in KV.findall(rest)}


def events(path: Path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                yield m, fields(m["rest"])


def num(v: str) -> int:
    return int(v, 0) if v not in ("(fault)",) else -99


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", type=Path)
    ap.add_argument("run", type=Path)
    ap.add_argument("--list", action="store_true", help="every wake-up and hint write, one a line")
    a = ap.parse_args()
    run = json.loads(a.run.read_text())
    start = run["host"]["uptime_s"]
    dur = run["duration_s"]
    workers = set()
    curr = {}  # cpu -> ("worker" | "idle" | "other", pid)
    hint = None
    hint_log = []  # (t_ms, cpu, idle, before, after)
    lb_open = {}  # cpu -> (t, idle, before)
    wake_open = {}  # waking cpu -> dict
    wakes = []
    writes = Counter()
    balances = Counter()
    listing = []
    for m, f in events(a.trace):
        t = (float(m["ts"]) - start) * 1e3
        cpu = int(m["cpu"])
        ev = m["ev"]
        if ev == "sched_switch":
            nxt = int(f["next_pid"])
            kind = "idle" if nxt == 0 else ("worker" if f["next_comm"].startswith(WORKER) else "other")
            if kind == "worker":
                workers.add(nxt)
            curr[cpu] = (kind, nxt)
        elif ev == "lb":
            if f.get("w") == "2":
                lb_open[cpu] = (t, int(f["idle"]), num(f["scan"]))
        elif ev == "lb_ret":
            if f.get("w") == "2" and cpu in lb_open:
                t0, idle, before = lb_open.pop(cpu)
                after = num(f["scan"])
                balances[(IDLE_TYPE.get(idle, idle), cpu)] += 1
                if after != before:
                    writes[(IDLE_TYPE.get(idle, idle), cpu)] += 1
                hint_log.append((t0, cpu, idle, before, after))
                if a.list and 0 <= t <= dur * 1e3:
                    listing.append((t0, f"CPU{cpu} balance ({IDLE_TYPE.get(idle, idle)}): hint {before} -> {after}"))
                hint = after
        elif ev == "sched_waking" and f.get("comm", "").startswith(WORKER):
            pid = int(f["pid"])
            wake_open[cpu] = {"t": t, "pid": pid, "waker_cpu": cpu, "asked": [], "hint": hint,
                              "state": {c: curr.get(c, ("?", -1))[0] for c in (0, 1)},
                              "state_pid": {c: curr.get(c, ("?", -1))[1] for c in (0, 1)}}
        elif ev == "wake" and cpu in wake_open:
            w = wake_open[cpu]
            w["prev"], w["recent"] = int(f["prev"]), int(f["recent"])
            w["in_select"] = True
        elif ev == "idle_ret" and cpu in wake_open and wake_open[cpu].get("in_select"):
            wake_open[cpu]["asked"].append((int(f["cpu"]), int(f["idle"])))
        elif ev == "wake_ret" and cpu in wake_open:
            w = wake_open[cpu]
            w["chosen"] = int(f["cpu"])
            w["recent_after"] = int(f["recent"])
            w["in_select"] = False
        elif ev == "sched_wakeup" and any(w["pid"] == int(f["pid"]) for w in wake_open.values()):
            # Not always on the waking CPU: a wake-up onto another idle CPU of
            # the LLC is queued on its wake list (TTWU_QUEUE, ttwu_queue_cond),
            # and sched_wakeup comes from there (ruc11; before, those were dropped).
            w = wake_open.pop(next(c for c, w in wake_open.items() if w["pid"] == int(f["pid"])))
            w["target"] = int(f["target_cpu"])
            wakes.append(w)
    # The wake-ups, after the first 100 ms (the threads' start), within the run.
    table = defaultdict(Counter)
    scanned_when = Counter()
    for w in wakes:
        if not (100 <= w["t"] <= dur * 1e3) or "prev" not in w:
            continue
        prev = w["prev"]
        other = 1 - prev
        at_prev, at_other = w["state"][prev], w["state"][other]
        if w["state_pid"][prev] == w["pid"]:
            at_prev = "itself"  # woken while still on its CPU (not yet switched out)
        # select_idle_sibling's questions after the target's own: recent_used_cpu's, then the scan's.
        asked = [c for c, _ in w["asked"]]
        scanned = len(asked) > 1 and asked[0] == prev and other in asked[1:] and w["recent"] != other
        recent_asked = w["recent"] == other and other in asked[1:]
        moved = w["target"] != prev
        if at_prev == "worker" and at_other == "idle":
            key = "prev runs a worker, other idle"
        elif at_prev in ("worker", "other") and at_other == "idle":
            key = "prev runs another task, other idle"
        elif at_prev in ("idle", "itself"):
            key = "prev idle"
        else:
            key = "both busy"
        how = "moved" if moved else "left"
        table[key][(how, f"hint {w['hint']}", "recent=other" if w["recent"] == other else "recent=prev",
                    "scanned" if scanned else ("asked recent" if recent_asked else "not scanned"))] += 1
        if a.list:
            listing.append((w["t"], f"wake pid {w['pid']} on CPU{w['waker_cpu']}: prev CPU{prev} ({at_prev}), other ({at_other}), "
                                    f"hint {w['hint']}, recent {w['recent']}->{w.get('recent_after')}, asked {w['asked']}, "
                                    f"-> CPU{w['target']} ({how})"))
    print(f"{a.trace}: start {start:.6f} s; {len(workers)} worker pids; {len(wakes)} worker wake-ups traced")
    lb_in = [h for h in hint_log if 0 <= h[0] <= dur * 1e3]
    print(f"LLC balances in the run: {len(lb_in)}; by kind and CPU (all the trace): "
          + ", ".join(f"{k[0]} CPU{k[1]} {v}" for k, v in sorted(balances.items(), key=str)))
    print("  writes that changed the hint: " + ", ".join(f"{k[0]} CPU{k[1]} {v}" for k, v in sorted(writes.items(), key=str)))
    vals = Counter(h[4] for h in lb_in)
    print("  hint after each balance in the run: " + ", ".join(f"{k}: {v}" for k, v in sorted(vals.items())))
    # Time the hint held each value within the run.
    held = Counter()
    for (t0, *_r, after), nxt in zip(lb_in, lb_in[1:] + [(dur * 1e3, 0, 0, 0, 0)]):
        held[after] += nxt[0] - t0
    print("  time the hint held each value (ms): " + ", ".join(f"{k}: {v:.0f}" for k, v in sorted(held.items())))
    for key, c in sorted(table.items()):
        n = sum(c.values())
        print(f"wake-ups, {key}: {n}")
        for k, v in sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0]))):
            print(f"    {v:4d}  {' / '.join(k)}")
    if a.list:
        for t, what in sorted(listing):
            print(f"{t:9.3f} {what}")


if __name__ == "__main__":
    main()
