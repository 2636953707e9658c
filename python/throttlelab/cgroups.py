"""The host's cgroup hierarchies, as the real backend finds them
(crates/throttlelab-real/src/cgroupfs.rs, ``Layout::detect``): where they are
mounted, and which directory is the cpu controller's. Read-only, over any
root, so that the acceptance driver's cgroups (throttlelab.acceptance.cgroup)
find the backend's hierarchy and are tested on temporary trees.
"""

from __future__ import annotations

import os
from pathlib import Path


class CgroupError(ValueError):
    """No cgroup (or hierarchy) where one was asked for: one line, exit 2."""


def cgroup_root() -> Path:
    """Where the cgroup hierarchies are mounted, as the real backend reads it
    (THROTTLELAB_CGROUP_ROOT, else /sys/fs/cgroup)."""
    return Path(os.environ.get("THROTTLELAB_CGROUP_ROOT", "/sys/fs/cgroup"))


def cpu_hierarchy(root: Path) -> Path:
    """The directory of the cpu controller's hierarchy under cgroup root
    ``root``: ``root`` on v2 (its ``cgroup.controllers`` lists cpu), ``root/cpu``
    (or ``root/cpu,cpuacct``) on v1."""
    controllers = root / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text().split():
        return root
    for name in ("cpu", "cpu,cpuacct"):
        if (root / name / "cpu.cfs_period_us").is_file():
            return root / name
    raise CgroupError(f"no cpu controller under {root}: neither cgroup v2 with cpu nor a v1 cpu hierarchy")


def is_v2(root: Path) -> bool:
    """Whether the cpu controller under ``root`` is cgroup v2's."""
    return cpu_hierarchy(root) == root
