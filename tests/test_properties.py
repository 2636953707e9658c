"""Invariants of the output for random valid bandwidth settings (hypothesis)."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import throttlelab
from helpers import scenario_text


@st.composite
def bandwidth(draw):
    """Valid settings for the test scenario: a profile, period, quota, burst, threads."""
    profile = draw(st.sampled_from(["4.18", "5.4", "5.14", "6.1", "6.6", "6.12", "6.18"]))
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
# Found by scripts/explore.sh: 8 refills in 0.5 s at a 67 ms period, 9 quotas in all.
@example(dict(profile='"6.6"', period_us="67123", quota_us="30626", burst_us="0", threads="2"))
def test_cpu_stat_invariants(params):
    doc = throttlelab.run(scenario_text(**params))
    cg = doc["cgroups"]["app"]
    assert doc["profile"] == params["profile"].strip('"')
    assert 0 <= cg["nr_throttled"] <= cg["nr_periods"]
    assert 0.0 <= cg["throttled_ratio"] <= 1.0
    # Usage is bounded by the CPUs (2) and by what the global pool hands out:
    # quota + burst at the start (the limit was set long before, so the idle
    # periods filled it), a quota at each period timer expiry in the run (the
    # timer's phase is arbitrary, so up to ceil(duration / period) of them),
    # and each CPU's overrun of its last runtime by up to a tick (4 ms).
    duration_us = 0.5e6
    assert cg["usage_usec"] <= 2 * duration_us * 1.01
    refills = math.ceil(duration_us / int(params["period_us"]))
    assert cg["usage_usec"] <= (refills + 1) * int(params["quota_us"]) + int(params["burst_us"]) + 2 * 10_000
    assert doc["tasks"]["spinner"]["threads"] == int(params["threads"])
