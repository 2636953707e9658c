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


def free_port() -> int:
    """A loopback TCP port nothing listens on (now)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
