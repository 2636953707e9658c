"""Where a cgroup's cpu.max comes from: which of (quota, period, burst) each
platform lets a user set, and a setting in that platform's own units.

- ``cgroup``: the cgroup's own files, any period: v2's ``cpu.max`` and
  ``cpu.max.burst``, v1's ``cpu.cfs_period_us``, ``cpu.cfs_quota_us`` and
  ``cpu.cfs_burst_us`` (quota ``-1`` for none), or both where the cgroup's
  version is not known (:func:`for_cgroup`).
- ``kubernetes``: ``resources.limits.cpu`` in millicores; the period is the
  kubelet's node-wide ``cpuCFSQuotaPeriod`` (100 ms unless changed) and the pod
  spec has no burst. The kubelet writes quota = millicores × period / 1000.
- ``docker``: ``--cpus`` (at the 100 ms period) or ``--cpu-period`` with
  ``--cpu-quota``; no burst flag.
- ``systemd``: ``CPUQuota=`` (percent of one CPU) and ``CPUQuotaPeriodSec=``; no
  burst setting. systemd stores the quota per second and scales it to the period.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from throttlelab.metrics import millicores

#: The kubelet's and Docker's default CFS period.
DEFAULT_PERIOD_US = 100_000


@dataclass(frozen=True)
class Platform:
    """Raw cgroup files, any period: v2's ``cpu.max`` and ``cpu.max.burst``,
    v1's ``cpu.cfs_*``, or (``version`` None) both."""

    name: str = "cgroup"
    #: The periods a user can choose; None: any (the search's candidates).
    periods_us: Optional[tuple[int, ...]] = None
    burst: bool = True
    #: The target cgroup's version, "v1" or "v2"; None: not known.
    version: Optional[str] = None

    def setting(self, quota_us: int, period_us: int, burst_us: int) -> str:
        """The limit as this platform's users write it."""
        if self.version == "v1":
            return f"cfs_quota_us {quota_us} cfs_period_us {period_us}" + (f", cfs_burst_us {burst_us}" if burst_us else "")
        return f"cpu.max {quota_us} {period_us}" + (f", cpu.max.burst {burst_us}" if burst_us else "")

    def snippet(self, quota_us: Optional[int], period_us: int, burst_us: int) -> str:
        """What to apply; ``quota_us`` None removes the limit."""
        v1, v2 = self._v1(quota_us, period_us, burst_us), self._v2(quota_us, period_us, burst_us)
        if self.version is not None:
            return v1 if self.version == "v1" else v2
        return f"# cgroup v2\n{v2}\n# cgroup v1 (the cpu hierarchy)\n{v1}"

    @staticmethod
    def _v2(quota_us: Optional[int], period_us: int, burst_us: int) -> str:
        if quota_us is None:
            return "echo max > cpu.max"
        burst = f"\necho {burst_us} > cpu.max.burst" if burst_us else ""
        return f"echo '{quota_us} {period_us}' > cpu.max{burst}"

    @staticmethod
    def _v1(quota_us: Optional[int], period_us: int, burst_us: int) -> str:
        # v1 checks each file against the others' values: the quota after
        # the period, the burst (at most the quota) after the quota.
        if quota_us is None:
            return "echo -1 > cpu.cfs_quota_us"
        burst = f"\necho {burst_us} > cpu.cfs_burst_us" if burst_us else ""
        return f"echo {period_us} > cpu.cfs_period_us\necho {quota_us} > cpu.cfs_quota_us{burst}"


@dataclass(frozen=True)
class Kubernetes(Platform):
    name: str = "kubernetes"
    periods_us: Optional[tuple[int, ...]] = (DEFAULT_PERIOD_US,)
    burst: bool = False

    def setting(self, quota_us: int, period_us: int, burst_us: int) -> str:
        return f"limits.cpu {millicores(quota_us, period_us)}m"

    def snippet(self, quota_us: Optional[int], period_us: int, burst_us: int) -> str:
        if quota_us is None:
            return "resources:\n  limits: {}  # no cpu limit"
        return f"resources:\n  limits:\n    cpu: {millicores(quota_us, period_us)}m"


@dataclass(frozen=True)
class Docker(Platform):
    name: str = "docker"
    burst: bool = False

    def setting(self, quota_us: int, period_us: int, burst_us: int) -> str:
        if period_us == DEFAULT_PERIOD_US:
            return f"--cpus {_decimal(quota_us / period_us, 3)}"
        return f"--cpu-period {period_us} --cpu-quota {quota_us}"

    def snippet(self, quota_us: Optional[int], period_us: int, burst_us: int) -> str:
        if quota_us is None:
            return "docker update --cpus 0 CONTAINER"
        return f"docker update {self.setting(quota_us, period_us, burst_us)} CONTAINER"


@dataclass(frozen=True)
class Systemd(Platform):
    name: str = "systemd"
    burst: bool = False

    def setting(self, quota_us: int, period_us: int, burst_us: int) -> str:
        return " ".join(self._directives(quota_us, period_us))

    def snippet(self, quota_us: Optional[int], period_us: int, burst_us: int) -> str:
        directives = ["CPUQuota="] if quota_us is None else self._directives(quota_us, period_us)
        return "\n".join(["# systemctl edit UNIT", "[Service]", *directives])

    @staticmethod
    def _directives(quota_us: int, period_us: int) -> list[str]:
        return [f"CPUQuota={_percent(quota_us, period_us)}", f"CPUQuotaPeriodSec={period_us // 1000}ms"]


def _percent(quota_us: int, period_us: int) -> str:
    """``quota_us`` per period as systemd's percent of one CPU (at most two places)."""
    return f"{_decimal(quota_us * 100 / period_us, 2)}%"


def _decimal(value: float, places: int) -> str:
    """``value`` rounded up to ``places`` decimals (a limit must not shrink), without trailing zeros."""
    scale = 10**places
    return f"{math.ceil(value * scale - 1e-9) / scale:.{places}f}".rstrip("0").rstrip(".")


PLATFORMS = {p.name: p for p in (Platform(), Kubernetes(), Docker(), Systemd())}


def for_cgroup(name: str, version: Optional[str]) -> Platform:
    """Platform ``name``; the raw cgroup one writing the files of a cgroup of
    ``version`` ("v1", "v2"; None: both)."""
    where = PLATFORMS[name]
    return replace(where, version=version) if name == "cgroup" else where
