"""Acceptance on real programs: capture a program under one CPU limit on the
host kernel, predict other limits with the simulator alone, run the program
under them, and judge each prediction against the runs (``throttlelab
accept``; docs/acceptance.md).

- `programs`: the `Program` interface and what a capture of one becomes
  (more threads), sysbench, stress-ng and the web servers' common part;
  `apache`, `nginx` and `pgbench` the other built-ins;
- `cgroup`: the fresh cgroup a run is measured in (v1 or v2), the run lock;
- `driver`: the runs, the predictions, the verdicts, the report and
  `rejudge`.
"""

from throttlelab.acceptance.driver import (
    PROGRAMS, AcceptanceError, Options, finished_run, judged, pooled_percentiles, rejudge, rejudge_file, resolve_programs,
    run_programs, verdicts,
)
from throttlelab.acceptance.programs import Config, Limit, Program, WebServer, request_percentiles, servers

__all__ = [
    "PROGRAMS", "AcceptanceError", "Config", "Limit", "Options", "Program", "WebServer", "finished_run", "judged",
    "pooled_percentiles", "rejudge", "rejudge_file", "request_percentiles", "resolve_programs", "run_programs", "servers", "verdicts",
]
