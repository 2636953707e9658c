"""ruc11: the paired simulator's wake-ups for each run of a sisutil9 hold, one
a line (time ns, thread, previous CPU, what each CPU ran, recent_used_cpu
before -> after, the CPU chosen), for compare.py. The engine prints them only
with sim_listing.patch applied (not kept in the engine) and RUC11_DEBUG set:

  git apply docs/edge-meet/ruc11/sim_listing.patch && pip install -e . (rebuild)
  RUC11_DEBUG=1 python sim_listing.py SCENARIO HOLD_DIR OUT_PREFIX [RUNS]
  git apply -R docs/edge-meet/ruc11/sim_listing.patch && rebuild

Each run is simulated in a child process (the engine writes to stderr):
OUT_PREFIX-N.txt. Threads 0-3 are the task's workers, the rest background.
"""
import json
import subprocess
import sys
from pathlib import Path

CHILD = r'''
import json, sys
from throttlelab import diff
text, host, n = open(sys.argv[1]).read(), json.loads(sys.argv[2]), int(sys.argv[3])
diff.paired_sim(text, [f"seed={n}"], host, 1)
'''


def main() -> None:
    scenario, hold, prefix = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    for n in range(1, runs + 1):
        host = dict(json.loads((hold / f"run-{n}.json").read_text())["host"])
        host.pop("vm", None)
        r = subprocess.run([sys.executable, "-c", CHILD, scenario, json.dumps(host), str(n)],
                           capture_output=True, text=True, check=True)
        lines = [l for l in r.stderr.splitlines() if l.startswith("RUC11 ")]
        Path(f"{prefix}-{n}.txt").write_text("\n".join(lines) + "\n")
        print(f"run {n}: {len(lines)} wake-ups listed")


if __name__ == "__main__":
    main()
