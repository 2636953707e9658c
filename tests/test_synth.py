"""The synthetic 004 trace and the built-in HCU scenarios made from it."""

from __future__ import annotations

import random
import statistics

import pytest

from throttlelab import run
from throttlelab.synth import HCU_TASKS, WINDOW_S, hcu_scenario, synthetic_windows, windows_from_csv


def test_windows_follow_table_1():
    rng = random.Random(1)
    for _, mean, sd, _ in HCU_TASKS[:8]:
        rates = [w[2] for w in synthetic_windows(mean, sd, 2000 * WINDOW_S, rng)]
        assert statistics.fmean(rates) == pytest.approx(mean, abs=0.01 + 0.1 * sd)
        assert statistics.stdev(rates) == pytest.approx(sd, abs=0.01 + 0.1 * sd)


def test_windows_cover_the_duration():
    windows = synthetic_windows(0.2, 0.05, 5438, random.Random(2))
    assert windows[0][0] == 0 and windows[-1][1] == 5438
    assert all(a[1] == b[0] for a, b in zip(windows, windows[1:]))
    assert all(w[2] >= 0 for w in windows)


def test_builtins_are_what_the_generator_makes():
    from importlib.resources import files

    for scheme in ("cfs", "cgroup", "deadline"):
        shipped = (files("throttlelab") / "scenarios" / f"thiyyakat-hcu-{scheme}.toml").read_text()
        assert shipped == hcu_scenario(scheme)


def test_a_users_csv(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("start_s,end_s,cpu_rate,class\n0,300,0.5,critical\n300,600,1.25,critical\n")
    windows, label = windows_from_csv(path)
    assert windows == [[0.0, 300.0, 0.5], [300.0, 600.0, 1.25]]
    assert label == "critical"


def test_a_trace_task_reports_class_and_delay():
    text = hcu_scenario("cfs").split("[[task]]")[0] + '[[task]]\nname = "t"\nclass = "critical"\nwindows = [[0, 10, 0.5]]\n'
    out = run(text)
    task = out["tasks"]["t"]
    assert task["class"] == "critical"
    assert 0 <= task["delay_s"] < 0.1
