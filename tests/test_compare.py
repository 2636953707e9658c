"""`throttlelab compare`: the kernel and the simulator side by side."""

from __future__ import annotations

import json
import os

import pytest

from helpers import cli, scenario_text
from test_errors import assert_error
from test_real import needs_real
import throttlelab.compare
from throttlelab import _native
from throttlelab.compare import SETTLE_S, Stats, compare, mean_host
from throttlelab.runner import simulate as simulate_with_engine
from throttlelab._native import profile_for_release


def simulate(*args, **kwargs) -> dict:
    """A simulation's output without its wall time, to compare with another's."""
    doc = simulate_with_engine(*args, **kwargs)
    del doc["engine"]
    return doc


@pytest.mark.parametrize(
    "release, profile",
    # The release table is the core's (profile.rs); this checks the binding.
    [("5.3.7", "4.18"), ("6.18.44-fc-v769", "6.18")],
)
def test_profile_for_release(release, profile):
    assert profile_for_release(release) == profile


def test_profile_for_unreadable_release():
    with pytest.raises(ValueError, match="kernel version"):
        profile_for_release("linux")


def test_simulator_is_set_up_like_the_host():
    """A run set up like a host is the run the scenario's own keys would give."""
    text = scenario_text(top="", period_us="10000", quota_us="10000")
    host = {"release": "5.4.0-1-amd64", "hz": 1000, "cgroup": "v2", "background_per_s": 21.5, "background_us": 48.25, "uptime_s": 19317.123456789}
    like = simulate(text, ["seed=3"], json.dumps(host))
    keys = ['kernel.profile="5.4"', "machine.hz=1000", "machine.background_per_s=21.5", "machine.background_us=48.25", "seed=3"]
    assert like == simulate(text, keys)
    assert like["profile"] == "5.4"
    # Without its CONFIG_HZ the host keeps the scenario's.
    assert simulate(text, [], json.dumps({**host, "hz": None})) == simulate(text, keys[:1] + keys[2:4])


def test_background_averages_over_runs():
    runs = [
        {"release": "6.18", "background_per_s": 10.0, "background_us": 100.0},
        {"release": "6.18", "background_per_s": 30.0, "background_us": 20.0},
    ]
    host = mean_host(runs)
    # 20 preemptions/s on average; (10 x 100 + 30 x 20) / 40 us each.
    assert (host["background_per_s"], host["background_us"]) == (20.0, 40.0)
    assert mean_host([{"background_per_s": 0.0, "background_us": 0.0}])["background_us"] == 0.0


def test_the_preemptions_median_is_the_runs_median_over_the_runs_that_had_one():
    run = {"release": "6.18", "background_per_s": 30.0, "background_us": 300.0}
    medians = [{**run, "background_p50_us": us} for us in (21.0, 40.0, 33.0)]
    assert mean_host([*medians, {**run, "background_p50_us": None}, run])["background_p50_us"] == 33.0
    assert "background_p50_us" not in mean_host([run, {**run, "background_p50_us": None}]), "no lengths: every preemption at the mean"
    # The simulator draws the lengths around that median: not the run at the mean's length.
    text = scenario_text(top="", period_us="20000", quota_us="40000")
    host = {**run, "hz": 250, "cgroup": "v2", "uptime_s": 1.0}
    keys = ['kernel.profile="6.18"', "machine.hz=250", "machine.background_per_s=30.0", "machine.background_us=300.0"]
    like = simulate(text, [], json.dumps({**host, "background_p50_us": 33.0}))
    assert like == simulate(text, [*keys, "machine.background_p50_us=33.0"])
    assert like != simulate(text, [], json.dumps(host))


def test_the_ticks_lateness_is_the_runs_median_where_every_run_measured_it():
    run = {"release": "6.18", "background_per_s": 1.0, "background_us": 1.0}
    latencies = [{**run, "tick_latency_us": us} for us in (7.0, 40.0, 9.0)]
    assert mean_host(latencies)["tick_latency_us"] == 9.0
    assert "tick_latency_us" not in mean_host([*latencies, run]), "one run without tracefs: the simulator's defaults"
    text = scenario_text(top="", period_us="10000", quota_us="10000")
    jitter = ["machine.tick_jitter_us=18.0", "machine.timer_jitter_us=18.0"]
    assert simulate(text, [], json.dumps({**run, "hz": 250, "cgroup": "v1", "uptime_s": 1.0, "tick_latency_us": 9.0})) == simulate(
        text, ['kernel.profile="6.18"', "machine.hz=250", "machine.background_per_s=1.0", "machine.background_us=1.0", *jitter])


def test_the_hosts_work_speed_is_the_runs_mean_and_slows_the_simulators_work():
    run = {"release": "6.18", "hz": 250, "cgroup": "v1", "uptime_s": 1.0, "background_per_s": 0.0, "background_us": 0.0}
    assert mean_host([{**run, "work_speed": 0.96}, {**run, "work_speed": 0.98}])["work_speed"] == pytest.approx(0.97)
    assert "work_speed" not in mean_host([{**run, "work_speed": 0.96}, run]), "a run from before the probe timed it"
    # One thread's 10 ms runs at 0.8 of nominal cost 12.5 ms of CPU: a 12 ms
    # quota per 20 ms period, never reached at full speed, now is.
    text = scenario_text(period_us="20000", quota_us="12000", threads="1", phases="[{ run_us = 10000 }, { sleep_us = 12000 }]")
    fast = simulate(text, [], json.dumps(run))["cgroups"]["app"]
    slow = simulate(text, [], json.dumps({**run, "work_speed": 0.8}))["cgroups"]["app"]
    assert (fast["nr_throttled"], slow["nr_throttled"] > 0) == (0, True)
    assert slow == simulate(text, ["machine.work_speed=0.8"], json.dumps(run))["cgroups"]["app"]


def test_the_hosts_work_speed_spread_is_the_runs_mean_and_reaches_the_simulator():
    run = {"release": "6.18", "hz": 250, "cgroup": "v1", "uptime_s": 1.0, "background_per_s": 0.0, "background_us": 0.0}
    assert mean_host([{**run, "work_speed_cv": 0.004}, {**run, "work_speed_cv": 0.012}])["work_speed_cv"] == pytest.approx(0.008)
    assert "work_speed_cv" not in mean_host([{**run, "work_speed_cv": 0.004}, run]), "a run from before the probe measured it"
    # One thread's 10 ms runs, at most one a 20 ms period, under 10.05 ms of quota: every run
    # the same never throttles; spread by 2 %, the runs over 10.05 ms do.
    text = scenario_text(period_us="20000", quota_us="10050", threads="1", phases="[{ run_us = 10000 }, { sleep_us = 12000 }]")
    even = simulate(text, [], json.dumps(run))["cgroups"]["app"]
    spread = simulate(text, [], json.dumps({**run, "work_speed_cv": 0.02}))["cgroups"]["app"]
    assert spread == simulate(text, ["machine.work_speed_cv=0.02"], json.dumps(run))["cgroups"]["app"]
    assert (even["nr_throttled"], spread["nr_throttled"] > 0) == (0, True)


def test_the_hosts_late_ticks_are_the_runs_mean_and_reach_the_simulator():
    run = {"release": "6.12", "hz": 250, "cgroup": "v2", "uptime_s": 1.0, "background_per_s": 0.0, "background_us": 0.0}
    late = lambda share, late_us: {**run, "tick_late": {"share": share, "late_us": late_us, "together": 1.0}}  # noqa: E731
    assert mean_host([late(0.1, 3000.0), late(0.3, 2000.0)])["tick_late"] == pytest.approx({"share": 0.2, "late_us": 2500.0, "together": 1.0})
    assert "tick_late" not in mean_host([late(0.1, 3000.0), run]), "a run from before the probe looked for them"
    assert mean_host([late(0.1, 3000.0), late(0.0, 0.0)])["tick_late"] == pytest.approx({"share": 0.05, "late_us": 3000.0, "together": 1.0})
    # Two spinners at their quota (60 ms per 30 ms): a tenth of the ticks 3 ms late on both
    # CPUs charge both nearly two ticks at once, and their last asks of a period find the pool short.
    text = scenario_text(period_us="30000", quota_us="60000", threads="2", phases="[{ run_us = 1_000_000_000 }]")
    on_time = simulate(text, ["duration_s=4"], json.dumps(run))["cgroups"]["app"]
    stalled = simulate(text, ["duration_s=4"], json.dumps(late(0.1, 3000.0)))["cgroups"]["app"]
    assert stalled == simulate(text, ["duration_s=4", "machine.tick_late_share=0.1", "machine.tick_late_us=3000",
                                      "machine.tick_late_together=1"], json.dumps(run))["cgroups"]["app"]
    # 2 and 27 of 133 periods.
    assert stalled["nr_throttled"] > 5 * on_time["nr_throttled"]


def test_each_simulator_run_gets_its_kernel_runs_timer_offsets():
    text = scenario_text(top="", period_us="10000", quota_us="10000")
    host = {
        "release": "6.18",
        "hz": 250,
        "cgroup": "v1",
        "background_per_s": 1.0,
        "background_us": 1.0,
        "period_timer_offset_us": {"app": 1989.5, "web": 0.25},
        "uptime_s": 19317.123456789,
    }
    keys = ["machine.background_per_s=1.0", "machine.background_us=1.0"]
    placed = ["machine.uptime_s=19317.123456789", "cgroup.app.period_timer_offset_us=1989.5"]
    assert simulate(text, [], json.dumps(host), placed=True) == simulate(text, keys + placed)
    assert simulate(text, [], json.dumps(host)) == simulate(text, keys), "not placed: drawn"
    # They differ per run, so the summary of the host leaves them out.
    assert not {"period_timer_offset_us", "uptime_s"} & set(mean_host([host]))


def test_each_kernel_run_waits_for_the_host_to_settle(monkeypatch):
    """The teardown of one kernel run must not count as the next one's background."""
    text = scenario_text(top="", period_us="10000", quota_us="10000")
    doc = json.loads(_native.run(text, []))
    host = {"release": "6.18.0", "hz": 250, "cgroup": "v1", "background_per_s": 1.0, "background_us": 1.0, "uptime_s": 100.0}
    kernel_doc = json.dumps({**doc, "backend": "real", "host": host})
    calls = []
    monkeypatch.setattr(throttlelab.compare.time, "sleep", calls.append)
    monkeypatch.setattr(throttlelab.compare._native, "real", lambda *args: calls.append("real") or kernel_doc)
    result = compare(text, runs=2)
    assert calls == [SETTLE_S, "real", SETTLE_S, "real"]
    assert len(result["sim_runs"]) == 2


def test_kernel_runs_without_traced_timers_leave_them_to_the_simulator(monkeypatch):
    """Without tracefs a kernel run reports no period timer offsets: the
    simulator draws its own, and the comparison says so."""
    text = scenario_text(top="", period_us="10000", quota_us="10000")
    doc = json.loads(_native.run(text, []))
    host = {"release": "6.18.0", "hz": 250, "cgroup": "v1", "background_per_s": 1.0, "background_us": 1.0, "uptime_s": 100.0}
    monkeypatch.setattr(throttlelab.compare.time, "sleep", lambda _s: None)
    monkeypatch.setattr(throttlelab.compare._native, "real", lambda *args: json.dumps({**doc, "backend": "real", "host": host}))
    result = compare(text, runs=1, paired=True)
    assert result["timers_placed"] is False
    assert result["sim_runs"][0]["cgroups"]["app"]["nr_periods"] > 0
    human = cli("compare", "two-spinners", "--runs", "1", "--paired")
    assert human.exit_code == 0, human.stderr
    text = " ".join(human.stdout.split())
    assert "paired: each run started as in its kernel run (period timers not traced)" in text
    # One run against one seed: the test cannot tell, and says so.
    assert "1 runs against 1 seeds can reach p = 1 at best" in text and "too few runs to tell" in text


def test_unpaired_by_default_the_simulator_draws_its_own_phases(monkeypatch):
    """A user predicting a limit has no kernel run to pair with: by default each
    simulator seed draws its start and timer phases, whatever the kernel's were."""
    text = scenario_text(top="", period_us="10000", quota_us="10000")
    doc = json.loads(_native.run(text, []))
    host = {"release": "6.18.0", "hz": 250, "cgroup": "v1", "background_per_s": 1.0, "background_us": 1.0}
    runs = iter([{**host, "uptime_s": 100.0, "period_timer_offset_us": {"app": 5.0}}, {**host, "uptime_s": 200.0, "period_timer_offset_us": {"app": 7.0}}])
    monkeypatch.setattr(throttlelab.compare.time, "sleep", lambda _s: None)
    monkeypatch.setattr(throttlelab.compare._native, "real", lambda *args: json.dumps({**doc, "backend": "real", "host": next(runs)}))
    result = compare(text, runs=2)
    assert (result["paired"], result["timers_placed"]) == (False, False)
    assert "Mann-Whitney U" in result["verdict"]
    drawn = [simulate(text, [f"seed={i}", "machine.background_per_s=1.0", "machine.background_us=1.0"]) for i in (1, 2)]
    assert [{k: v for k, v in r.items() if k != "engine"} for r in result["sim_runs"]] == drawn


def test_each_seed_is_set_up_like_its_kernel_run():
    """Unpaired, seed i takes what kernel run i's probe measured (modulo the
    runs): the seeds spread as the host's state did, not at its mean."""
    text = scenario_text(top="", period_us="10000", quota_us="10000")
    host = {"release": "6.18.0", "hz": 250, "cgroup": "v1", "background_per_s": 1.0, "background_us": 1.0, "uptime_s": 1.0}
    kernel = [{"host": {**host, "work_speed": speed}} for speed in (0.5, 1.0)]
    runs = throttlelab.compare.simulator_runs(text, kernel, seeds=3)
    like = lambda i, speed: simulate(text, [f"seed={i}"], json.dumps({**host, "work_speed": speed}))  # noqa: E731
    assert [{k: v for k, v in r.items() if k != "engine"} for r in runs] == [like(1, 0.5), like(2, 1.0), like(3, 0.5)]


@pytest.mark.parametrize(
    "kernel, sim, alike",
    [
        ([0.5] * 5, [0.5] * 5, True),  # one value on both sides
        ([0.0] * 5, [0.0] * 5, True),  # never throttled on either side
        ([0.49, 0.5, 0.5, 0.5, 0.49], [0.5, 0.5, 0.0, 0.49, 0.5], True),  # the odd seed of a marginal case
        ([0.1, 0.11, 0.12, 0.13, 0.14], [0.2, 0.21, 0.22, 0.23, 0.24], False),  # every seed above every run
    ],
)
def test_the_verdict_compares_distributions(kernel, sim, alike):
    assert throttlelab.compare.same_distribution(kernel, sim) is alike


def test_the_smallest_p_is_both_tails_of_u_zero():
    from scipy.stats import mannwhitneyu

    smallest_p = throttlelab.compare.smallest_p
    assert smallest_p(3, 3) == pytest.approx(0.1) and smallest_p(5, 5) == pytest.approx(2 / 252)
    assert smallest_p(1, 1) == 1.0
    # The exact test of fully separated samples reaches it, and nothing lower.
    for n, m in [(3, 3), (4, 4), (5, 5), (3, 5)]:
        separated = mannwhitneyu(range(n), range(10, 10 + m), alternative="two-sided", method="exact").pvalue
        assert separated == pytest.approx(smallest_p(n, m))


@pytest.mark.parametrize(
    "kernel, sim, verdict",
    [
        # 3 against 3 cannot reach p < 0.05, not even when every seed is above every run.
        ([0.49, 0.50, 0.51], [0.017, 0.3, 0.51], "too few runs to tell"),
        ([0.10, 0.11, 0.12], [0.20, 0.21, 0.22], "too few runs to tell"),
        ([0.5] * 3, [0.5] * 3, "alike"),  # one value on both sides: nothing to test
        ([0.1, 0.11, 0.12, 0.13, 0.14], [0.2, 0.21, 0.22, 0.23, 0.24], "differs"),
        ([0.49, 0.5, 0.5, 0.5, 0.49], [0.5, 0.5, 0.0, 0.49, 0.5], "alike"),
    ],
)
def test_a_verdict_only_where_the_test_can_give_one(kernel, sim, verdict):
    assert throttlelab.compare.verdict(kernel, sim) == verdict


def test_a_comparison_of_three_runs_says_it_cannot_tell():
    runs = [{"cgroups": {"app": {m: float(v) for m in throttlelab.compare.METRICS}}} for v in (1, 2, 3)]
    sims = [{"cgroups": {"app": {m: float(v) for m in throttlelab.compare.METRICS}}} for v in (10, 20, 30)]
    rows = throttlelab.compare.verdicts(runs, sims)["app"]
    assert {row["verdict"] for row in rows.values()} == {"too few runs to tell"}
    assert throttlelab.compare.DEFAULT_RUNS == 5 and throttlelab.compare.smallest_p(5, 5) < throttlelab.compare.ALPHA


def test_the_mean_of_equal_runs_is_their_value():
    """Five simulator runs equal to the kernel's highest run are inside its range."""
    runs = Stats.of([399 / 400] * 5)
    assert runs.mean == 399 / 400
    assert Stats.of([398 / 399, *[399 / 400] * 4]).hi >= runs.mean


def test_stats():
    s = Stats.of([1.0, 2.0, 3.0])
    assert (s.mean, s.sd, s.lo, s.hi) == (2.0, 1.0, 1.0, 3.0)
    assert Stats.of([5.0]).sd == 0.0


@needs_real
def test_compare_two_spinners(tmp_path, capfd):
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(top="", period_us="10000", quota_us="10000"))
    result = cli("compare", str(path), "--runs", "2", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["runs"] == 2 and len(doc["kernel_runs"]) == 2 and len(doc["sim_runs"]) == 2
    assert all(r["backend"] == "real" for r in doc["kernel_runs"])
    assert all(r["backend"] == "sim" for r in doc["sim_runs"])
    assert all(r["profile"] == profile_for_release(doc["host"]["release"]) for r in doc["sim_runs"])
    # The kernel's timer offsets, read from tracefs, are within a period;
    # where there is no tracefs to be had, the run said why and went on.
    if all("period_timer_offset_us" in run["host"] for run in doc["kernel_runs"]):
        for run in doc["kernel_runs"]:
            assert 0 <= run["host"]["period_timer_offset_us"]["app"] < 10000
    else:
        assert "throttlelab: period timer offsets not reported: " in capfd.readouterr().err
    row = doc["cgroups"]["app"]["usage_usec"]
    # Two spinners under one CPU of quota for 0.5 s: about 0.5 s of usage on both sides.
    for side in ("kernel", "sim"):
        assert 0.4e6 < row[side]["mean"] < 0.6e6, row
        assert row[side]["lo"] <= row[side]["mean"] <= row[side]["hi"]
    assert row["mean_in_range"] == (row["kernel"]["lo"] <= row["sim"]["mean"] <= row["kernel"]["hi"])
    # Two runs against two seeds: no verdict but where both sides are one value.
    assert doc["smallest_p"] == pytest.approx(1 / 3)
    assert row["verdict"] == throttlelab.compare.verdict(
        [r["cgroups"]["app"]["usage_usec"] for r in doc["kernel_runs"]], [r["cgroups"]["app"]["usage_usec"] for r in doc["sim_runs"]]
    )
    human = cli("compare", str(path), "--runs", "1")
    assert human.exit_code == 0, human.stderr
    assert "throttled %" in human.stdout and "verdict" in human.stdout
    assert "unpaired: each seed draws its own start and period timer phases" in " ".join(human.stdout.split())
    assert "cpu.max 10000 10000 (1 CPU, 1000m)" in " ".join(human.stdout.split())


def test_compare_refuses_before_it_waits(write_scenario, monkeypatch):
    """What the real backend refuses (here more CPUs than the host has, or no
    root) is refused before compare lets the host settle for the first run."""

    def no_sleep(_s):
        raise AssertionError("compare waited before refusing")

    monkeypatch.setattr(throttlelab.compare.time, "sleep", no_sleep)
    cpus = str(os.cpu_count() + 1)
    word = "machine.cpus" if os.geteuid() == 0 else "root"
    assert_error(cli("compare", write_scenario(), "--set", f"machine.cpus={cpus}"), word)


def test_compare_unknown_scenario():
    assert_error(cli("compare", "no-such-scenario"), "no-such-scenario")
