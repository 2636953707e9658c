#!/usr/bin/env python3
"""Hold 1 (prom5, #35): why pgbench missed at 406m. The five as run-2-merged's
apply runs them (prometheus_live.run_all, at once, 60 s), with pgbench's cgroup
captured (`throttlelab capture`) over the window cpu.stat is read in:
  1. every workload at advise's limits (pgbench 406m), as the miss;
  2. every workload at its first limits (pgbench 300m), as the scrape the fit read;
  3. pgbench alone at 406m (no neighbours).
Writes OUT/runs.json (each run's cpu.stat) and OUT/pgbench-{406m,300m,406m-alone}.toml.
    tl-measure bash docs/prometheus-live/run-2-prom5/hold1.sh
"""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from throttlelab.acceptance import prometheus_live as live

HERE = Path(__file__).resolve().parent
RUN_S = 60.0


def captured(name: str, out: Path) -> threading.Thread:
    """`throttlelab capture` of pgbench's cgroup from LEAD_S into the run to
    TAIL_S before its end (the cpu.stat window), in a thread."""
    cgroup = live.Cgroup(live.PREFIX + "pgbench", live.PERIOD_US, 0, 0).path

    def body() -> None:
        time.sleep(live.LEAD_S)
        with open(out / f"{name}.log", "w") as log:
            rc = subprocess.run(
                [sys.executable, "-m", "throttlelab", "capture", "--cgroup", str(cgroup), "--duration", f"{RUN_S - live.LEAD_S - live.TAIL_S:g}s",
                 "-o", str(out / f"{name}.toml")], stdout=log, stderr=subprocess.STDOUT,
            ).returncode  # fmt: skip
            log.write(f"capture rc={rc}\n")

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


def main() -> None:
    plan = json.loads((HERE.parent / "run-2-merged" / "plan.json").read_text())
    advised = live.applied(plan)["throttlelab"]
    first = {w.name: w.limit_m for w in live.WORKLOADS}
    runs = [("pgbench-406m", advised), ("pgbench-300m", first), ("pgbench-406m-alone", {"pgbench": advised["pgbench"]})]

    def body(programs):
        out = {}
        for name, limits in runs:
            t = captured(name, HERE)
            out[name] = {"limits_m": limits, "cpu_stat": live.run_all(limits, RUN_S, programs)}
            t.join()
            print(name, json.dumps(out[name]["cpu_stat"]["pgbench"]), flush=True)
        return out

    result = live.with_programs(body, False)
    (HERE / "runs.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
