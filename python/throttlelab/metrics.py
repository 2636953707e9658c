"""The cgroup metrics as users know them, named and scaled the same in every
command: cgroup v2 ``cpu.stat`` keys (v1's ``cpu.stat`` has nr_periods,
nr_throttled and throttled_time in ns), and the throttled ratio that
cAdvisor's ``container_cpu_cfs_throttled_periods_total /
container_cpu_cfs_periods_total`` alerts on (Prometheus' CPUThrottlingHigh)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Metric:
    key: str  # in the output document, as in cpu.stat
    header: str  # a column's title, with its unit
    scale: float  # from the document's unit to the header's
    fmt: str

    def show(self, value: float) -> str:
        return format(value * self.scale, self.fmt)


#: In table order. ``throttled_usec`` sums every CPU's throttled time, so it
#: can exceed the run; the header says so.
CGROUP_METRICS = (
    Metric("usage_usec", "usage s", 1e-6, ".3f"),
    Metric("nr_periods", "nr_periods", 1, ".0f"),
    Metric("nr_throttled", "nr_throttled", 1, ".0f"),
    Metric("throttled_ratio", "throttled %", 100, ".1f"),
    Metric("throttled_usec", "throttled ms\n(all CPUs)", 1e-3, ".1f"),
    Metric("nr_bursts", "nr_bursts", 1, ".0f"),
    Metric("burst_usec", "burst ms", 1e-3, ".1f"),
)

BY_KEY = {m.key: m for m in CGROUP_METRICS}


def millicores(quota_us: int, period_us: int) -> int:
    """The fewest millicores whose quota (millicores × period / 1000, as the
    kubelet writes it) is at least ``quota_us``."""
    return -(-quota_us * 1000 // period_us)


def limit(quota_us: Optional[int], period_us: int, burst_us: int = 0) -> str:
    """A cgroup's limit as cpu.max reads, with CPUs and Kubernetes millicores:
    ``cpu.max 50000 100000 (0.5 CPUs, 500m)``; ``cpu.max max`` without one."""
    if quota_us is None or quota_us < 0:
        return "cpu.max max"
    burst = f", cpu.max.burst {burst_us}" if burst_us else ""
    cpus = quota_us / period_us
    return f"cpu.max {quota_us} {period_us} ({cpus:.3g} CPU{'s' if cpus != 1 else ''}, {millicores(quota_us, period_us)}m){burst}"


def percentile(sorted_values: list[float], p: float) -> float:
    """The `p`-th percentile (0 < p <= 100) of ascending `sorted_values` by
    nearest rank, as the core's output computes a task's `latency_us`; 0.0
    when empty."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), -(-len(sorted_values) * p // 100)))
    return sorted_values[int(rank) - 1]
