"""rel61: how often the workers change CPU, in a guest_trace.py run and in the
simulator paired to it under profiles 5.14 and 6.1 (the kernel's sched_switch
against the simulator's switch records; a worker's switch-in on a CPU other
than the one it last ran on is a migration), and the wake-ups of the kernel's
workers by what their previous and the other CPU ran (placement.py's count).

  python migrations.py SCENARIO OUT [RUNS]   # OUT: guest_trace.py's (trace-N.txt.gz, run-N.json)
"""
import gzip
import json
import re
import sys
from collections import Counter
from pathlib import Path

from throttlelab import diff

SWITCH = re.compile(r"\[(\d+)\].*?(\d+\.\d+): sched_switch: .*next_comm=(\S+) next_pid=(\d+)")


def kernel_moves(trace: str) -> tuple[int, int]:
    """(switch-ins, migrations) of the worker threads (comm throttlelab-wor)."""
    last, ins, moves = {}, 0, 0
    for line in trace.splitlines():
        m = SWITCH.search(line)
        if not m or m[3] != "throttlelab-wor":
            continue
        cpu, pid = int(m[1]), int(m[4])
        ins += 1
        moves += pid in last and last[pid] != cpu
        last[pid] = cpu
    return ins, moves


def sim_moves(records: list[dict], tg: int) -> tuple[int, int]:
    """(switch-ins, migrations) of group ``tg``'s threads in the simulator's records."""
    last, ins, moves = {}, 0, 0
    for r in records:
        if r["kind"] != "switch" or r["tg"] != tg or r.get("arg") is None:
            continue
        ins += 1
        moves += r["arg"] in last and last[r["arg"]] != r["cpu"]
        last[r["arg"]] = r["cpu"]
    return ins, moves


def main() -> None:
    scenario, out = Path(sys.argv[1]), Path(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    text = scenario.read_text()
    total = Counter()
    for n in range(1, runs + 1):
        kout = json.loads((out / f"run-{n}.json").read_text())
        host = dict(kout["host"])
        host.pop("vm", None)
        k = kout["cgroups"]["app"]
        ins, moves = kernel_moves(gzip.decompress((out / f"trace-{n}.txt.gz").read_bytes()).decode(errors="replace"))
        line = [f"run {n}: kernel {k['nr_throttled']}/{k['nr_periods']} throttled, {moves} migrations in {ins} switch-ins"]
        total.update({"kernel moves": moves, "kernel ins": ins})
        # The host's release sets the profile (a --set does not win over it): 5.15 maps to 5.14.
        for profile, release in (("5.14", "5.15.0"), ("6.1", host["release"])):
            sout, records = diff.paired_sim(text, [f"seed={n}"], {**host, "release": release}, 1)
            assert sout["profile"] == profile, sout["profile"]
            s = sout["cgroups"]["app"]
            ins, moves = sim_moves(records, 1)
            line.append(f"simulator {profile}: {s['nr_throttled']}/{s['nr_periods']}, {moves} in {ins}")
            total.update({f"{profile} moves": moves, f"{profile} ins": ins})
        print("; ".join(line))
    print(f"all runs: kernel {total['kernel moves']} migrations in {total['kernel ins']} switch-ins; "
          + "; ".join(f"simulator {p} {total[p + ' moves']} in {total[p + ' ins']}" for p in ("5.14", "6.1")))


if __name__ == "__main__":
    main()
