"""The synthetic 004 trace and the built-in HCU scenarios made from it."""

from __future__ import annotations

import json
import random
import statistics

import pytest
from click.testing import CliRunner

from throttlelab import run
from throttlelab.cli import main
from throttlelab.synth import HCU_TASKS, SCHEMES, WINDOW_S, WORKLOADS, lcu_tasks, synthetic_windows, workload_scenario


def test_windows_follow_table_1():
    rng = random.Random(1)
    for t in HCU_TASKS[:8]:
        rates = [w[2] for w in synthetic_windows(t.mean, t.sd, 2000 * WINDOW_S, rng)]
        assert statistics.fmean(rates) == pytest.approx(t.mean, abs=0.01 + 0.1 * t.sd)
        assert statistics.stdev(rates) == pytest.approx(t.sd, abs=0.01 + 0.1 * t.sd)


def test_lcu_follows_what_004_says_of_it():
    tasks = lcu_tasks()
    critical = [t for t in tasks if t.label == "critical"]
    background = [t for t in tasks if t.label == "background"]
    assert (len(critical), len(background)) == (9, 33)
    assert sum(t.mean for t in critical) == pytest.approx(1.66)  # Table 6's median, of 4 cores
    assert min(t.mean for t in critical) >= max(t.mean for t in background)  # "much higher"
    assert all(t.duration_s == 6600 for t in critical)
    assert max(t.duration_s for t in background) <= 1500  # short-lived
    assert lcu_tasks() == tasks, "seeded"


def test_windows_cover_the_duration():
    windows = synthetic_windows(0.2, 0.05, 5438, random.Random(2))
    assert windows[0][0] == 0 and windows[-1][1] == 5438
    assert all(a[1] == b[0] for a, b in zip(windows, windows[1:]))
    assert all(w[2] >= 0 for w in windows)


def test_builtins_are_what_the_generator_makes():
    from importlib.resources import files

    for workload in WORKLOADS:
        for scheme in SCHEMES:
            shipped = (files("throttlelab") / "scenarios" / f"thiyyakat-{workload}-{scheme}.toml").read_text()
            assert shipped == workload_scenario(workload, scheme)


def test_a_users_csv_relative_to_the_scenario_file(tmp_path, monkeypatch):
    (tmp_path / "t.csv").write_text("start_s,end_s,cpu_rate,class\n0,3,0.5,critical\n3,6,0.25,critical\n")
    (tmp_path / "s.toml").write_text('name = "csv"\n[[task]]\nname = "t"\ntrace_csv = "t.csv"\n')
    monkeypatch.chdir("/")
    result = CliRunner().invoke(main, ["run", str(tmp_path / "s.toml"), "--json"])
    assert result.exit_code == 0, result.output
    task = json.loads(result.output)["tasks"]["t"]
    assert task["class"] == "critical"
    assert task["cpu_usec"] == pytest.approx(0.5 * 3e6 + 0.25 * 3e6, rel=0.01)
    (tmp_path / "t.csv").write_text("0,3,fast\n")
    result = CliRunner().invoke(main, ["run", str(tmp_path / "s.toml")])
    assert result.exit_code == 2
    assert "task.t.trace_csv:" in result.output and "t.csv line 1: not a number" in result.output


def test_a_trace_task_reports_class_and_delay():
    text = workload_scenario("hcu", "cfs").split("[[task]]")[0] + '[[task]]\nname = "t"\nclass = "critical"\nwindows = [[0, 10, 0.5]]\n'
    out = run(text)
    task = out["tasks"]["t"]
    assert task["class"] == "critical"
    assert 0 <= task["delay_s"] < 0.1
