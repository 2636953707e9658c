"""Invariants of the output for random valid bandwidth settings (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import throttlelab
from helpers import scenario_text


@st.composite
def bandwidth(draw):
    """Valid settings for the test scenario: a profile, period, quota, burst, threads."""
    profile = draw(st.sampled_from(["4.18", "5.4", "5.14", "6.6", "6.18"]))
    period = draw(st.integers(1_000, 100_000))
    quota = draw(st.integers(1_000, 4 * period))
    # cpu.max.burst exists since 5.14.
    burst = draw(st.integers(0, quota)) if profile not in ("4.18", "5.4") else 0
    threads = draw(st.integers(1, 4))
    return dict(
        profile=f'"{profile}"', period_us=str(period), quota_us=str(quota),
        burst_us=str(burst), threads=str(threads),
    )


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bandwidth())
def test_cpu_stat_invariants(params):
    doc = throttlelab.run(scenario_text(**params))
    cg = doc["cgroups"]["app"]
    assert doc["profile"] == params["profile"].strip('"')
    assert 0 <= cg["nr_throttled"] <= cg["nr_periods"]
    assert 0.0 <= cg["throttled_ratio"] <= 1.0
    # Usage is bounded by the CPUs (2) and, over whole periods, by quota + burst.
    duration_us = 0.5e6
    assert cg["usage_usec"] <= 2 * duration_us * 1.01
    periods = duration_us / int(params["period_us"]) + 1
    assert cg["usage_usec"] <= periods * int(params["quota_us"]) + int(params["burst_us"]) + 2 * 10_000
    assert doc["tasks"]["spinner"]["threads"] == int(params["threads"])
