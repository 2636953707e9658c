"""What a capture measured at its limit: the ``[capture]`` table that
``throttlelab capture`` writes (the captured cgroup's ``cpu.stat`` deltas over
the capture, and its path), for the commands that show it beside a replay
(``explain``, ``advise``, ``report``). The core checks the table and does not
keep it, so it is read here from the scenario's text."""

from __future__ import annotations

import tomllib
from pathlib import PurePosixPath
from typing import Any, Optional

#: cgroup v1 hierarchies that hold the cpu controller, as mounted.
V1_CPU_DIRS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


def at_limit(text: str) -> Optional[dict[str, Any]]:
    """The capture's cpu.stat at its limit (cgroup v2 names), or None for a
    scenario that is not a capture: nr_periods, nr_throttled, throttled_ratio,
    the CPUs its threads used (``usage_cpus``: cpu.stat's usage where the
    cgroup counts it, else the threads' time on CPUs) and ``source``."""
    try:
        captured = tomllib.loads(text).get("capture")
    except tomllib.TOMLDecodeError:  # TOML the core reads and Python's 1.0 parser does not
        return None
    if not isinstance(captured, dict) or not captured.get("nr_periods") or not captured.get("duration_s"):
        return None
    usage_usec = captured.get("usage_usec", captured["cpu_usec"])
    return {
        "source": captured["source"],
        "nr_periods": captured["nr_periods"],
        "nr_throttled": captured["nr_throttled"],
        "throttled_ratio": captured["nr_throttled"] / captured["nr_periods"],
        "usage_usec": usage_usec,
        "usage_cpus": usage_usec / (captured["duration_s"] * 1e6),
    }


def cgroup_version(source: Optional[str]) -> Optional[str]:
    """``"v1"`` or ``"v2"``: which files the cgroup at path ``source`` has, by
    where its path is (a directory of a v1 hierarchy of the cpu controller,
    ``/sys/fs/cgroup/cpu/...``, or any other cgroup path: v2); None where no
    path is known (a capture of pids, no capture)."""
    if not source or not source.startswith("/"):
        return None
    parts = PurePosixPath(source).parts
    if parts[:4] == ("/", "sys", "fs", "cgroup") and len(parts) > 4:
        return "v1" if parts[4] in V1_CPU_DIRS else "v2"
    return None
