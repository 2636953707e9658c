"""Test helpers: invoke the CLI in-process, build small scenario texts."""

from __future__ import annotations

import json
from string import Template
from typing import Any

from click.testing import CliRunner, Result

from throttlelab.cli import main

#: A small, fast scenario; every ``$key`` can be replaced by a test.
SCENARIO = Template(
    """# a test scenario
name = "t"
duration_s = 0.5
seed = 1
$top
[machine]
cpus = 2
hz = $hz
$machine
[kernel]
profile = $profile
features = $features
$kernel
[[cgroup]]
name = "app"
period_us = $period_us
quota_us = $quota_us
burst_us = $burst_us
$cgroup
[[task]]
name = "spinner"
cgroup = $task_cgroup
threads = $threads
phases = $phases
$task
"""
)

DEFAULTS = dict(
    top="", machine="", kernel="", cgroup="", task="",
    hz="250", profile='"6.18"', features="[]",
    period_us="10000", quota_us="20000", burst_us="0",
    task_cgroup='"app"', threads="2", phases="[{ run_us = 1_000_000_000 }]",
)


def scenario_text(**changes: str) -> str:
    """The test scenario with some ``$key`` placeholders replaced."""
    unknown = set(changes) - set(DEFAULTS)
    assert not unknown, f"no placeholder {unknown}"
    return SCENARIO.substitute({**DEFAULTS, **changes})


def cli(*args: str) -> Result:
    """Invoke the CLI in-process; stdout and stderr are kept apart."""
    result = CliRunner().invoke(main, list(args), prog_name="throttlelab")
    # The CLI must handle every error itself: anything else escaping is a bug.
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def run_json(*args: str) -> dict[str, Any]:
    result = cli("run", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def write_capture(tmp_path: Any, source: str = "/sys/fs/cgroup/w", usage_usec: int | None = None, cgroups: str = "") -> str:
    """A capture of one thread (20 ms of work in every 50 ms, 2 s of it) in
    cgroup app at 20 ms per 100 ms, taken at ``source``, which the kernel
    throttled in 18 of 20 periods; ``cgroups``: more [[cgroup]] tables.
    Returns the scenario's path."""
    import gzip

    burst = b"run_us 20000\nsleep_us 30000\n"
    (tmp_path / "w.phases.gz").write_bytes(gzip.compress(b"# throttlelab phases v1\n[a-1]\n" + 40 * burst))
    usage = "" if usage_usec is None else f"usage_usec = {usage_usec}\n"
    out = tmp_path / "w.toml"
    out.write_text('name = "c"\nduration_s = 2\n[[cgroup]]\nname = "app"\nperiod_us = 100000\nquota_us = 20000\n' + cgroups
                   + '[[task]]\nname = "a-1"\ncgroup = "app"\nloop = 1\nphases_file = "w.phases.gz"\n'
                   f'[capture]\nsource = "{source}"\nrelease = "6.18.0"\nduration_s = 2\nthreads = 1\n{usage}'
                   'nr_periods = 20\nnr_throttled = 18\nthrottled_usec = 900000\ncpu_usec = 400000\n')
    return str(out)


def free_port() -> int:
    """A loopback TCP port nothing listens on (now)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def script(name: str) -> Any:
    """scripts/NAME.py as a module (registered in sys.modules: its dataclasses
    look their module up)."""
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
