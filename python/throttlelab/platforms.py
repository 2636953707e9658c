"""Where a cgroup's cpu.max comes from: which of (quota, period, burst) each
platform lets a user set, and a setting in that platform's own units.

- ``cgroup``: ``cpu.max`` and ``cpu.max.burst`` themselves, any period.
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
from dataclasses import dataclass
from typing import Optional

from throttlelab.metrics import millicores

#: The kubelet's and Docker's default CFS period.
DEFAULT_PERIOD_US = 100_000


@dataclass(frozen=True)
class Platform:
    """Raw cgroup files: ``cpu.max`` and ``cpu.max.burst``, any period."""

    name: str = "cgroup"
    #: The periods a user can choose; None: any (the search's candidates).
    periods_us: Optional[tuple[int, ...]] = None
    burst: bool = True

    def setting(self, quota_us: int, period_us: int, burst_us: int) -> str:
        """The limit as this platform's users write it."""
        return f"cpu.max {quota_us} {period_us}" + (f", cpu.max.burst {burst_us}" if burst_us else "")

    def snippet(self, quota_us: Optional[int], period_us: int, burst_us: int) -> str:
        """What to apply; ``quota_us`` None removes the limit."""
        if quota_us is None:
            return "echo max > cpu.max"
        burst = f"\necho {burst_us} > cpu.max.burst" if burst_us else ""
        return f"echo '{quota_us} {period_us}' > cpu.max{burst}"


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
