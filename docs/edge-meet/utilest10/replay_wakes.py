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
    tasks = rh.Tasks()
    curr = {0: 0, 1: 0}
    kernel_hint = None
    model = {"first tick": None, "first tick + busy": None}
    pending = {}  # cpu -> jiffy boundary of its idle interval's first tick, not yet written
    result = Counter()

    def sum_at(t):
        return sum(tasks.util_avgs(t))

    def catch_up(t):
        """Writes of the first idle tick due before t (the state is constant since the last event)."""
        for cpu, j in sorted(pending.items(), key=lambda kv: kv[1]):
            if j <= t:
                h = rh.hint(sum_at(j))
                for k in model:
                    model[k] = h
                del pending[cpu]

    for t, cpu, ev, kv in rh.events(trace):
        catch_up(t)
        tasks.apply(t, cpu, ev, kv)
        if ev == "sched_switch":
            nxt = int(kv["next_pid"])
            if nxt:
                pending.pop(cpu, None)
            elif curr[cpu] != 0:
                pending[cpu] = (t // TICK_US + 1) * TICK_US  # the next jiffy boundary
            curr[cpu] = nxt
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
