"""The cgroups an acceptance run puts a program in, v1 or v2, and the run lock.

A program under test is started inside a fresh cgroup of its own (its
processes and what they fork), limited as one row of the table says, as a
container would be; its ``cpu.stat`` is read over the measured window. Unlike
the real backend's cgroups (crates/throttlelab-real/src/cgroupfs.rs) these
have no parent of the harness's with the largest weight: the program runs at
the default weight beside its clients (h2load, pgbench). The hierarchy is
found as everywhere else (throttlelab.cgroups); the run lock is the real
backend's own (lock.rs, through the bindings).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

from throttlelab._native import LOCK_PATH, HarnessError, RunLock
from throttlelab.cgroups import cgroup_root, is_v2

CGROUP_ROOT = cgroup_root()


class LockHeld(RuntimeError):
    """Another real run holds the lock."""


@contextlib.contextmanager
def run_lock(path: Path = Path(LOCK_PATH)) -> Iterator[None]:
    """Hold the real backend's run lock at `path` while the block runs (one run
    measuring the host at a time, since each would count the other as
    background); refuse (LockHeld, naming the holder's pid) while another run
    holds it."""
    try:
        lock = RunLock(path)
    except HarnessError as e:
        raise LockHeld(str(e)) from None
    try:
        yield
    finally:
        lock.release()


def _v2() -> bool:
    return is_v2(CGROUP_ROOT)


#: v1 hierarchies beside cpu that a cgroup of ours may have a twin in: cpuacct
#: holds its usage, pids its thread count (what cAdvisor's `container_threads` reads).
TWINS = ("cpuacct", "pids")


def cgroup_dirs(cgroup: Path) -> list[Path]:
    """`cgroup` and, on v1 with cpuacct (or pids) mounted apart from cpu, the
    directories of the same name there that exist."""
    if _v2() or (cgroup / "cpuacct.usage").exists() or not cgroup.is_relative_to(CGROUP_ROOT / "cpu"):
        return [cgroup]
    twins = [CGROUP_ROOT / h / cgroup.relative_to(CGROUP_ROOT / "cpu") for h in TWINS]
    return [cgroup, *(t for t in twins if t.is_dir())]


def attach(cgroup: Path, pid: int) -> None:
    """Move process `pid` (all its threads) into `cgroup` (and its cpuacct twin)."""
    for d in cgroup_dirs(cgroup):
        (d / "cgroup.procs").write_text(f"{pid}\n")


def spawn(cgroup: Path, argv: list[str], **popen: object) -> subprocess.Popen:
    """Start `argv` inside `cgroup` (before it execs, so that nothing of it runs
    outside), in a session of its own so that `stop` reaches what it forks."""
    return subprocess.Popen(argv, preexec_fn=lambda: attach(cgroup, os.getpid()), start_new_session=True, **popen)


def stop(proc: subprocess.Popen) -> None:
    """End `proc`'s session (SIGTERM, then SIGKILL after 3 s) and reap it."""
    for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue


class Cgroup:
    """A cgroup of our own under the cpu hierarchy (and its cpuacct twin on v1),
    limited to `quota_us` (-1: no limit) per `period_us` with `burst_us`;
    removed, with anything left in it killed, on exit. `pids`: on v1, a twin in
    the pids hierarchy too (as the kubelet makes), so that cAdvisor counts its
    threads."""

    def __init__(self, name: str, period_us: int, quota_us: int, burst_us: int, pids: bool = False) -> None:
        self.v2 = _v2()
        self.path = CGROUP_ROOT / name if self.v2 else CGROUP_ROOT / "cpu" / name
        self.dirs = [self.path] if self.v2 else [self.path, *(CGROUP_ROOT / h / name for h in TWINS[: 1 + pids])]
        self.limit = (period_us, quota_us, burst_us)

    def __enter__(self) -> "Cgroup":
        if self.v2:
            subtree = CGROUP_ROOT / "cgroup.subtree_control"
            if "cpu" not in subtree.read_text().split():
                subtree.write_text("+cpu")
        for d in self.dirs:
            if d.parent.is_dir():
                d.mkdir()
        period_us, quota_us, burst_us = self.limit
        if self.v2:
            (self.path / "cpu.max").write_text(f"{quota_us} {period_us}")
            (self.path / "cpu.max.burst").write_text(str(burst_us))
        else:
            (self.path / "cpu.cfs_period_us").write_text(str(period_us))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota_us))
            (self.path / "cpu.cfs_burst_us").write_text(str(burst_us))
        return self

    def __exit__(self, *_exc: object) -> None:
        for d in self.dirs:
            if not d.is_dir():
                continue
            for _ in range(50):
                pids = (d / "cgroup.procs").read_text().split()
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)

    def stats(self) -> dict[str, int]:
        """cpu.stat's counters with throttled time in usec, and the usage in usec."""
        raw = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        out = {k: int(raw[k]) for k in ("nr_periods", "nr_throttled")}
        if self.v2:
            out["throttled_usec"] = int(raw["throttled_usec"])
            out["usage_usec"] = int(raw["usage_usec"])
        else:
            out["throttled_usec"] = int(raw["throttled_time"]) // 1000
            acct = self.dirs[1] / "cpuacct.usage"
            if (self.path / "cpuacct.usage").exists():
                acct = self.path / "cpuacct.usage"
            out["usage_usec"] = int(acct.read_text()) // 1000
        return out
