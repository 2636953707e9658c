"""`throttlelab explain`: why a cgroup throttles, every number from simulations."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import cli, scenario_text, write_capture
from test_errors import assert_error
from throttlelab.explain import measure_periods


def explain_json(*args: str) -> dict:
    result = cli("explain", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return str(path)


def fix(doc: dict, key: str) -> dict:
    return next(f for f in doc["fixes"] if f["key"] == key)


def test_two_spinners_under_one_cpu_want_twice_the_quota_every_period(tmp_path):
    # 2 always-running threads on 2 CPUs, 10 ms per 10 ms period: they want 20 ms of every period.
    doc = explain_json(write(tmp_path, scenario_text(quota_us="10000")), "--runs", "2")
    assert doc["cgroup"] == "app" and doc["seeds"] == [1, 2] and doc["throttled"]
    demand = doc["demand_per_period"]
    assert abs(demand["p50_us"] - 20000) < 500 and demand["max_us"] <= 20000
    assert demand["over_quota_ratio"] > 0.95
    assert doc["now"]["throttled_ratio"] > 0.95
    assert doc["concurrency"]["threads"] == 2 and doc["concurrency"]["peak_per_period"]["p50"] == 2
    # One thread wants exactly the quota: marginal (ticks charge it late), throttled about half as often.
    assert fix(doc, "threads-spinner")["throttled_ratio"] < 0.6
    # 15 ms of quota is still short of 20 ms: every period still throttles.
    assert fix(doc, "quota+50")["throttled_ratio"] > 0.9
    assert fix(doc, "no-limit")["throttled_ratio"] == 0.0
    # Each claim came from a run: seeds x (now, the unlimited demand run, every variant).
    assert doc["runs"] == 2 * (2 + len(doc["mechanics"]) + len(doc["fixes"]))


def test_the_text_says_it_in_numbers(tmp_path):
    result = cli("explain", write(tmp_path, scenario_text(quota_us="10000")), "--runs", "2")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "is throttled in" in out and "mean of 2 seeds" in out
    assert "p50 20.0 ms" in out and "against a quota of 10.0 ms" in out
    assert "fix -> throttled" in out and "what the mechanics contribute" in out


def test_a_workload_under_its_quota_is_not_throttled(tmp_path):
    # 2 ms of every 10 ms on one thread, under 20 ms per 10 ms.
    text = scenario_text(threads="1", phases="[{ run_us = 2000 }, { sleep_us = 8000 }]")
    doc = explain_json(write(tmp_path, text), "--runs", "2")
    assert not doc["throttled"] and doc["now"]["throttled_ratio"] == 0.0
    assert doc["demand_per_period"]["over_quota_ratio"] == 0.0 and doc["demand_per_period"]["max_us"] <= 2100
    assert doc["fixes"] == [] and doc["mechanics"] == []
    result = cli("explain", write(tmp_path, text), "--runs", "2")
    assert "is not throttled in any of 2 seeds" in result.stdout


def test_a_longer_period_or_more_quota_throttles_a_bursty_workload_less(tmp_path):
    # 20 ms bursts every 50 ms (0.4 CPUs) under 0.5 CPUs at a 10 ms period: every burst throttles.
    text = scenario_text(
        threads="1", quota_us="5000", phases="[{ run_us = 20000 }, { sleep_us = 30000 }]",
    ).replace("duration_s = 0.5", "duration_s = 2")
    doc = explain_json(write(tmp_path, text), "--runs", "3")
    now = doc["now"]["throttled_ratio"]
    assert now > 0.3
    # The mean demand is below the quota, but the bursts' periods ask for 10 ms of 5.
    demand = doc["demand_per_period"]
    assert demand["mean_us"] < 5000 < demand["p90_us"] and demand["over_quota_ratio"] > 0.3
    # 50 ms periods hold a whole burst in 25 ms of quota; +50 % quota is still short of 10 ms.
    assert fix(doc, "period-x5")["throttled_ratio"] < now / 4
    assert fix(doc, "quota+50")["throttled_ratio"] <= now
    assert fix(doc, "period-x2")["throttled_ratio"] < now


def test_a_capture_explains(tmp_path):
    out = write_capture(tmp_path)
    doc = explain_json(out, "--runs", "2")
    assert doc["cgroup"] == "app" and doc["throttled"]
    # 20 ms of every 50 ms: about 40 ms per 100 ms period, against 20 ms.
    assert 30000 <= doc["demand_per_period"]["p50_us"] <= 50000
    assert fix(doc, "no-limit")["throttled_ratio"] == 0.0
    # What the kernel counted over the capture, beside the replay.
    assert doc["capture"] == {"source": "/sys/fs/cgroup/w", "nr_periods": 20, "nr_throttled": 18, "throttled_ratio": 0.9,
                              "usage_usec": 400000, "usage_cpus": 0.2}
    text = " ".join(cli("explain", out, "--runs", "2").stdout.split())
    assert "the kernel throttled it in 90.0 % of periods over the capture (nr_throttled 18 of nr_periods 20)" in text
    # What it got at the limit, beside the demand without it.
    assert "where it used 0.20 CPUs at this limit: what it got, not what it asks for" in text


def test_a_bad_cgroup_is_one_line(tmp_path):
    assert_error(cli("explain", "two-spinners", "--cgroup", "ap"), "--cgroup ap", "did you mean app")
    text = scenario_text(quota_us="-1")
    assert_error(cli("explain", write(tmp_path, text)), "no cgroup of t has a limit")
    assert_error(cli("explain", write(tmp_path, text), "--cgroup", "app"), "--cgroup app: has no limit")
    assert_error(cli("explain", "two-spinners", "--set", "cgroup.app.quota_us=500"), "cgroup.app.quota_us")


def test_the_most_throttled_group_is_explained_by_default(tmp_path):
    text = scenario_text(
        quota_us="20000",
        task='[[cgroup]]\nname = "tight"\nperiod_us = 10000\nquota_us = 5000\n'
             '[[task]]\nname = "other"\ncgroup = "tight"\nthreads = 1\nphases = [{ run_us = 1_000_000_000 }]\n',
    )
    assert explain_json(write(tmp_path, text), "--runs", "1")["cgroup"] == "tight"


def test_the_traced_pass_bins_cpu_time_and_counts_threads():
    # Two spinners on 2 CPUs, no limit: 20 ms of CPU in each 10 ms window, both on CPUs throughout.
    series = measure_periods(scenario_text(quota_us="-1"), [], "app")
    assert len(series["ran_ns"]) == 50  # 0.5 s of 10 ms windows, none empty at the end
    assert all(abs(ns - 20_000_000) < 100_000 for ns in series["ran_ns"])
    assert set(series["at_start"]) == {2} and set(series["peak"]) == {2}
    # One thread of 2 ms every 10 ms: at most one at once, 2 ms per window.
    text = scenario_text(quota_us="-1", threads="1", phases="[{ run_us = 2000 }, { sleep_us = 8000 }]")
    series = measure_periods(text, [], "app")
    assert max(series["peak"]) == 1 and all(1_900_000 <= ns <= 2_100_000 for ns in series["ran_ns"][:-1])
    assert 50 <= len(series["burst_peak"]) <= 52 and set(series["burst_peak"]) == {1}  # a burst every 10 ms
    # Four threads of 2 ms every 10 ms on 2 CPUs start together: bursts of 2 at once.
    text = scenario_text(quota_us="-1", threads="4", phases="[{ run_us = 2000 }, { timer_us = 10000 }]")
    series = measure_periods(text, [], "app")
    assert set(series["burst_peak"]) == {2} and set(series["peak"]) == {2}


def test_a_window_cut_short_by_the_end_is_not_a_period():
    # 0.5004 s of two spinners: 50 whole 10 ms windows and 0.4 ms of a 51st, which would
    # count as a period of 0.8 ms demand and pull the mean down by 2 %.
    series = measure_periods(scenario_text(quota_us="-1"), ["duration_s=0.5004"], "app")
    assert len(series["ran_ns"]) == len(series["at_start"]) == len(series["peak"]) == 50
    assert min(series["ran_ns"]) > 19_900_000
    # A run shorter than one period keeps its one window.
    assert len(measure_periods(scenario_text(quota_us="-1"), ["duration_s=0.004"], "app")["ran_ns"]) == 1


def test_from_python():
    import throttlelab

    doc = throttlelab.explain("two-spinners", seeds=1, set=["duration_s=1", "cgroup.app.quota_us=15000"])
    assert doc["cgroup"] == "app" and doc["seeds"] == [1] and doc["demand_per_period"]["over_quota_ratio"] == 1.0
