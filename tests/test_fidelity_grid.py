"""scripts/fidelity_grid.py's edge grid (issue 34): the configurations it
lists, the order it measures them in, and its holds: rows kept as they
finish, a resumed grid measuring only the rest, and no row started after
--max-minutes. The kernel is a stand-in here (the grid's measurements run
under tl-measure, docs/fidelity.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from helpers import script
from throttlelab import _native
from throttlelab.runner import simulate

grid = script("fidelity_grid")


def test_the_edge_grid_is_the_issues():
    configs = grid.edge_configurations()
    assert len(configs) == 224 and len({grid.key(c) for c in configs}) == 224
    spin = [c for c in configs if c["workload"] == "spin"]
    assert len(spin) == 4 * 7 * 2
    # A spinner's demand is a CPU, at most the machine's two: the quota.
    assert all(c["quota_us"] == min(c["threads"], 2) * c["period_us"] for c in spin)
    run_sleep = [c for c in configs if c["workload"] == "run10000-sleep18600"]
    assert sorted({c["demand_ratio"] for c in run_sleep}) == [0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25]
    for c in run_sleep:
        demand_us = c["threads"] * 10_000 / 28_600 * c["period_us"]
        assert abs(demand_us / c["quota_us"] - c["demand_ratio"]) < 1e-3, c
    assert all(c["burst_us"] in (0, c["quota_us"]) for c in configs)
    assert all(c["quota_us"] >= 1000 for c in configs), "the kernel's smallest quota"
    # The issue's knife edge: 2 threads of 10 ms run / 18.6 ms sleep under 70/100 ms.
    assert {"workload": "run10000-sleep18600", "threads": 2, "period_us": 100_000, "quota_us": 69930, "burst_us": 0,
            "demand_ratio": 1.0} in configs
    for c in configs:  # each a scenario the real backend takes
        _native.validate(grid.scenario_text(c, 2), [])
    first = sorted(configs, key=grid.measured_first)
    assert [c["workload"] for c in first[:56]] == ["spin"] * 56
    assert {c["demand_ratio"] for c in first[56:56 + 4 * 24]} == {0.95, 1.0, 1.05, 1.1}


def _kernel_run(text: str, runs, settle_s: float):
    """A stand-in kernel: each run's document as the real backend writes one."""
    for i, _ in enumerate(runs):
        yield json.dumps({
            "host": {"release": "6.18.0", "hz": 250, "cgroup": "v1", "background_per_s": 30.0 + i, "background_us": 150.0,
                     "background_p50_us": 40.0 + 10 * i, "work_speed": 0.98, "tick_latency_us": 7.0, "uptime_s": 1000.0 + i, "period_timer_offset_us": {"app": 1234.0},
                     "wakeup_cost_us": 15.0 + i, "run_sleep_work_speed": 0.5, "background_lengths_us": [10.0 + i, 500.0]},
            "cgroups": {"app": {"throttled_ratio": 0.1 * i, "throttled_usec": 1000 * i, "usage_usec": 1_000_000, "nr_periods": 100 - i}},
        })


def _args(out: Path, **kw) -> argparse.Namespace:
    return argparse.Namespace(**{"grid": "edge", "runs": 3, "duration_s": 1.0, "out": out, "max_minutes": None, **kw})


def test_a_hold_keeps_its_rows_and_the_next_measures_the_rest(tmp_path):
    configs = grid.edge_configurations()[:3]
    out = tmp_path / "edge.md"
    done = grid.measure(configs[:2], _args(out), _kernel_run, None)
    assert [grid.key(r) for r in done["rows"]] == [grid.key(c) for c in configs[:2]]
    stored = json.loads(out.with_suffix(".json").read_text())
    assert stored == done and stored["host"]["release"] == "6.18.0"
    row = stored["rows"][0]
    assert row["kernel_ratio"] == [0.0, 0.1, 0.2] and row["background_per_s"] == 31.0 and row["tick_latency_us"] == 7.0
    assert row["kernel_nr_periods"] == [100, 99, 98], "each run's periods between the controller's reads"
    assert row["background_p50_us"] == 50.0, "the median of the runs' medians"
    assert (row["wakeup_cost_us"], row["run_sleep_work_speed"]) == (16.0, 0.5), "the runs' fits, averaged"
    assert [h["wakeup_cost_us"] for h in row["run_hosts"]] == [15.0, 16.0, 17.0], "and each run's own"
    assert row["background_lengths_us"] == [10.0, 11.0, 12.0, 500.0, 500.0, 500.0], "the runs' lengths pooled"
    assert [h["background_lengths_us"] for h in row["run_hosts"]] == [[10.0, 500.0], [11.0, 500.0], [12.0, 500.0]]
    measured: list[str] = []

    def counting(text, runs, settle_s):
        measured.append(text)
        return _kernel_run(text, runs, settle_s)

    resumed = grid.measure(configs, _args(out), counting, stored)
    assert len(measured) == 1 and len(resumed["rows"]) == 3, "only the row the hold lacked"
    assert json.loads(out.with_suffix(".json").read_text())["rows"][:2] == stored["rows"]


def test_a_regrade_keeps_every_key_a_measurement_wrote():
    # A regraded row keeps KERNEL_KEYS of the stored one: a key measured() writes and it
    # lacks would be lost at the first regrade (work_speed_cv was).
    written = grid.measured([json.loads(d) for d in _kernel_run("", range(3), 0)])
    assert set(written) == set(grid.KERNEL_KEYS)


def test_no_row_starts_after_max_minutes(tmp_path):
    out = tmp_path / "edge.md"
    done = grid.measure(grid.edge_configurations(), _args(out, max_minutes=1e-9), _kernel_run, None)
    assert done["rows"] == []


def test_stored_rows_set_the_simulator_up_like_their_host():
    host = {"release": "6.18.0", "hz": 250, "cgroup": "v1", "background_per_s": 1.0, "background_us": 1.0}
    row = {"kernel_ratio": [0.5, 0.6], "uptime_s": [10.0, 20.0], "timer_offset_us": [5.0, None], "background_per_s": 40.0,
           "background_us": 200.0, "work_speed": 0.97, "tick_latency_us": 9.0}
    runs = grid.stored_runs(host, row)
    assert [r["host"]["uptime_s"] for r in runs] == [10.0, 20.0]
    assert {(r["host"]["background_per_s"], r["host"]["background_us"], r["host"]["work_speed"], r["host"]["tick_latency_us"])
            for r in runs} == {(40.0, 200.0, 0.97, 9.0)}
    assert "period_timer_offset_us" not in runs[1]["host"]
    assert "work_speed_cv" not in runs[0]["host"], "not measured, not assumed: every run the same"
    assert {r["host"]["work_speed_cv"] for r in grid.stored_runs(host, row, work_speed_cv=0.006)} == {0.006}, "assumed"
    measured = {**row, "work_speed_cv": 0.012}
    assert {r["host"]["work_speed_cv"] for r in grid.stored_runs(host, measured, work_speed_cv=0.006)} == {0.012}, "measured wins"
    assert "tick_late" not in runs[0]["host"], "not looked for, not assumed"
    assumed = {"share": 0.1, "late_us": 3000.0, "together": 0.8}
    assert all(r["host"]["tick_late"] == assumed for r in grid.stored_runs(host, row, tick_late=assumed)), "assumed"
    found = {**row, "tick_late": {"share": 0.05, "late_us": 2000.0, "together": 1.0}}
    assert all(r["host"]["tick_late"] == found["tick_late"] for r in grid.stored_runs(host, found, tick_late=assumed)), "measured wins"
    assert "wakeup_cost_us" not in runs[0]["host"], "not timed, not assumed: no cost per wake-up"
    assert {r["host"]["wakeup_cost_us"] for r in grid.stored_runs(host, row, wakeup_cost_us=40.0)} == {40.0}, "assumed"
    timed = {**row, "wakeup_cost_us": 17.5}
    assert {r["host"]["wakeup_cost_us"] for r in grid.stored_runs(host, timed, wakeup_cost_us=40.0)} == {17.5}, "measured wins"
    # --forget-tick-late: an old probe's late ticks (no wakeup_cost_us) are left out, or assumed; a new one's kept.
    assert all("tick_late" not in r["host"] for r in grid.stored_runs(host, found, forget_tick_late=True)), "forgotten"
    assert all(r["host"]["tick_late"] == assumed for r in grid.stored_runs(host, found, tick_late=assumed, forget_tick_late=True))
    new_probe = {**found, "wakeup_cost_us": 17.5}
    assert all(r["host"]["tick_late"] == found["tick_late"] for r in grid.stored_runs(host, new_probe, forget_tick_late=True)), "probe11's"


def test_a_row_that_kept_each_runs_probe_gives_each_run_its_own():
    host = {"release": "6.12.0", "hz": 250, "cgroup": "v2", "background_per_s": 1.0, "background_us": 1.0}
    row = {"kernel_ratio": [0.5, 0.6], "uptime_s": [10.0, 20.0], "timer_offset_us": [None, None], "background_per_s": 40.0,
           "background_us": 200.0, "work_speed": 0.7, "background_p50_us": 30.0,
           "run_hosts": [{"background_per_s": 30.0, "background_us": 100.0, "work_speed": 0.5},
                         {"background_per_s": 50.0, "background_us": 300.0, "work_speed": 0.9, "background_p50_us": 40.0}]}
    runs = grid.stored_runs(host, row)
    assert [(r["host"]["background_per_s"], r["host"]["work_speed"]) for r in runs] == [(30.0, 0.5), (50.0, 0.9)]
    assert [r["host"].get("background_p50_us") for r in runs] == [None, 40.0], "each run's own median, none where it had none"
    assert all("background_p50_us" not in r["host"] for r in grid.stored_runs(host, row, median=False)), "--mean-only"


def test_a_stored_row_draws_its_own_median_or_the_mean():
    host = {"release": "6.18.0", "hz": 250, "cgroup": "v1", "background_per_s": 1.0, "background_us": 1.0, "background_p50_us": 0.5}
    row = {"kernel_ratio": [0.5, 0.6], "uptime_s": [10.0, 20.0], "timer_offset_us": [5.0, None], "background_per_s": 40.0,
           "background_us": 200.0}
    # A row from before the probe measured a median: the mean, not the grid's host's median.
    assert all("background_p50_us" not in r["host"] for r in grid.stored_runs(host, row))
    measured = {**row, "background_p50_us": 19.0}
    assert {r["host"]["background_p50_us"] for r in grid.stored_runs(host, measured)} == {19.0}
    assert all("background_p50_us" not in r["host"] for r in grid.stored_runs(host, measured, median=False)), "--mean-only"


@pytest.mark.parametrize("at", [2, -1])
def test_an_edge_row_holds_both_columns_against_the_kernel(at):
    seeds, config = 3, grid.edge_configurations()[at]
    text = grid.scenario_text(config, 0.5)
    kernel = [json.loads(d) for d in _kernel_run(text, range(3), 0)]
    measurement = grid.measured(kernel)
    alone = grid.scenario_alone(text, seeds)
    like_host = grid.simulator_runs(text, kernel, seeds=seeds)
    row = grid.edge_row(config, measurement, alone, like_host)
    assert len(row["sim_ratio_alone"]) == len(row["sim_ratio"]) == seeds
    plain = lambda doc: {k: v for k, v in doc.items() if k != "engine"}  # noqa: E731
    assert plain(alone[1]) == plain(simulate(text, ["seed=2"])), "alone: the scenario as it is, [machine]'s defaults"
    assert plain(like_host[1]) == plain(simulate(text, ["seed=2"], like_host=json.dumps(kernel[1]["host"]))), "seed 2: like run 2"
    md = grid.edge_markdown([row], 3, seeds, 0.5, kernel[0]["host"], 224)
    assert "1 of the 224 configurations measured" in md and md.count(f"\n| {config['workload']} |") == 1


def _graded(tmp_path: Path, verdicts: list) -> Path:
    """A regraded edge grid whose first rows carry ``verdicts`` as their 'alike'."""
    rows = [{**c, "alike": alike} for c, alike in zip(grid.edge_configurations(), verdicts)]
    path = tmp_path / "graded.json"
    path.write_text(json.dumps({"host": {}, "rows": rows}))
    return path


def test_only_differing_keeps_the_rows_a_regraded_grid_grades_differs_in_the_grids_order(tmp_path):
    configs = grid.edge_configurations()
    path = _graded(tmp_path, [True, False, True, False, False])
    kept = grid.differing(configs, path)
    assert [grid.key(c) for c in kept] == [grid.key(c) for c in (configs[1], configs[3], configs[4])]
    out = tmp_path / "fresh.md"
    done = grid.measure(kept, _args(out), _kernel_run, None)
    assert [grid.key(r) for r in done["rows"]] == [grid.key(c) for c in kept], "a hold measures those rows only"


@pytest.mark.parametrize("text, says", [
    (None, "No such file"),
    ("{not json", "Expecting property name"),
    ('{"host": {}, "rows": [{"workload": "spin"}]}', "not a regraded grid"),
    ('[1, 2]', "not a regraded grid"),
])
def test_only_differing_names_a_grid_it_cannot_use(tmp_path, text, says):
    path = tmp_path / "bad.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ValueError, match=f"--only-differing {path}: .*{says}"):
        grid.differing(grid.edge_configurations(), path)


def test_only_differing_refuses_a_kernel_only_grid_and_one_where_nothing_differs(tmp_path):
    kernel_only = tmp_path / "kernel-only.json"
    kernel_only.write_text(json.dumps({"host": {}, "rows": [dict(grid.edge_configurations()[0])]}))
    with pytest.raises(ValueError, match="its 'alike' verdict"):
        grid.differing(grid.edge_configurations(), kernel_only)
    with pytest.raises(ValueError, match="no configuration of this grid differs there"):
        grid.differing(grid.edge_configurations(), _graded(tmp_path, [True, True]))


def test_the_script_says_what_is_wrong_with_only_differing_in_one_line(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "bad.json"
    path.write_text("[]")
    done = subprocess.run([sys.executable, str(Path(grid.__file__)), "--grid", "edge", "--regrade", str(path),
                           "--only-differing", str(path)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"fidelity_grid.py: error: --only-differing {path}: not a regraded grid")


@pytest.mark.parametrize("option, value, regrade, says", [
    ("--work-speed-cv", "-0.01", True, "machine.work_speed_cv: must be in [0, 0.1], got -0.01"),
    ("--work-speed-cv", "0.2", True, "machine.work_speed_cv: must be in [0, 0.1], got 0.2"),
    ("--work-speed-cv", "nan", True, "machine.work_speed_cv: must be in [0, 0.1], got NaN"),
    ("--work-speed-cv", "0.006", False, "needs --regrade"),
    ("--tick-late", "0.07,2899", True, "not SHARE,LATE_US,TOGETHER (three numbers)"),
    ("--tick-late", "1.5,2899,0.7", True, "machine.tick_late_share: must be in [0, 1), got 1.5"),
    ("--tick-late", "0.07,2899,0.7", False, "needs --regrade"),
    ("--wakeup-cost-us", "-1", True, "machine.wakeup_cost_us: must be in [0, 4000) (one tick), got -1"),
    ("--wakeup-cost-us", "17", False, "needs --regrade"),
])
def test_the_script_says_what_is_wrong_with_an_assumption_in_one_line(tmp_path, option, value, regrade, says):
    """--work-speed-cv and --tick-late: each needs --regrade, and the core's
    validation of its machine keys speaks for their bounds."""
    import subprocess
    import sys
    path = tmp_path / "grid.json"
    path.write_text("{}")
    done = subprocess.run([sys.executable, str(Path(grid.__file__)), "--grid", "edge", *(["--regrade", str(path)] if regrade else []),
                           option, value], capture_output=True, text=True)
    shown = float(value) if option in ("--work-speed-cv", "--wakeup-cost-us") else value
    assert done.returncode == 2 and done.stderr == f"fidelity_grid.py: error: {option} {shown}: {says}\n", done.stderr


def test_a_probe_that_kept_the_lengths_gives_them_or_the_log_normal():
    host = {"release": "6.18.0", "hz": 250, "cgroup": "v1", "background_per_s": 1.0, "background_us": 1.0,
            "background_lengths_us": [1.0]}
    row = {"kernel_ratio": [0.5, 0.6], "uptime_s": [10.0, 20.0], "timer_offset_us": [None, None], "background_per_s": 40.0,
           "background_us": 200.0,
           "run_hosts": [{"background_per_s": 30.0, "background_us": 100.0, "background_p50_us": 12.0},
                         {"background_per_s": 50.0, "background_us": 300.0, "background_p50_us": 14.0,
                          "background_lengths_us": [8.0, 14.0, 2000.0]}]}
    runs = grid.stored_runs(host, row)
    # Each run's own: none from the grid's host where its probe kept none (before probe12).
    assert [r["host"].get("background_lengths_us") for r in runs] == [None, [8.0, 14.0, 2000.0]]
    lognormal = grid.stored_runs(host, row, lengths=False)
    assert all("background_lengths_us" not in r["host"] for r in lognormal), "--lognormal-background"
    assert [r["host"]["background_p50_us"] for r in lognormal] == [12.0, 14.0]
    assert all("background_lengths_us" not in r["host"] for r in grid.stored_runs(host, row, median=False)), "--mean-only"
