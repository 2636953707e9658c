"""rt-app workloads (JSON) as scenarios: every command that takes a scenario takes one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import cli, run_json
from test_errors import assert_error
from test_real import needs_real, real_json

EXAMPLE = str(Path(__file__).resolve().parent.parent / "docs" / "rt-app" / "periodic.json")


def test_the_example_runs_as_the_scenario_it_becomes(tmp_path):
    shown = cli("scenarios", "show", EXAMPLE)
    assert shown.exit_code == 0, shown.stderr
    toml = tmp_path / "periodic.toml"
    toml.write_text(shown.stdout)
    limit = ["--set", "cgroup.app.quota_us=20000", "--set", "cgroup.app.period_us=16000"]
    from_json, from_toml = run_json(EXAMPLE, *limit), run_json(str(toml), *limit)
    del from_json["engine"], from_toml["engine"]
    assert from_json == from_toml
    # 4 threads that want both CPUs in their bursts, under 1.25 CPUs: throttled.
    assert from_json["cgroups"]["app"]["nr_throttled"] > 0
    assert run_json(EXAMPLE)["cgroups"]["app"]["nr_throttled"] == 0, "unlimited until --set limits it"


def test_validate_and_sweep_take_an_rt_app_workload():
    result = cli("validate", EXAMPLE)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "ok: periodic (1 cgroups, 1 tasks)\n"
    rows = json.loads(cli("sweep", EXAMPLE, "--grid", "cgroup.app.quota_us=10000,40000", "--set", "cgroup.app.period_us=16000", "--json").stdout)
    assert rows[0]["cgroup.app.throttled_ratio"] > rows[1]["cgroup.app.throttled_ratio"]


@pytest.mark.parametrize(
    "workload, message",
    [
        ('{"tasks": {"a": {"run": 1, "mutex": 3}}}', "tasks.a.mutex: unknown rt-app key"),
        ('{"tasks": {"a": {"run": 1, "lock": "m"}}, "global": {"duration": 1}}', "tasks.a.lock: rt-app's lock event is not modelled"),
        ('{"tasks": {"a": {"run": 1}}}', "global.duration: a task loops forever: give the run's length in seconds"),
        ('{"tasks": {\n"a": }', "rt-app JSON: expected value at line 2"),
    ],
)
def test_a_malformed_or_unmodelled_workload_is_one_line_exit_2(tmp_path, workload, message):
    path = tmp_path / "w.json"
    path.write_text(workload)
    result = cli("run", str(path))
    assert_error(result, message)


@needs_real
def test_runtime_and_timer_events_on_the_kernel(tmp_path):
    """A thread busy for 50 ms of every 100 ms of wall time (rt-app's runtime
    and timer) under 25 ms per 100 ms: it gets the quota, on the kernel as in
    the simulator."""
    path = tmp_path / "half.json"
    path.write_text('{"global": {"duration": 1}, "tasks": {"t": {"taskgroup": "/app", "runtime": 50000, "timer": {"period": 100000}}}}')
    limit = ("cgroup.app.quota_us=25000", "cgroup.app.period_us=100000")
    kernel = real_json(str(path), *limit)["cgroups"]["app"]
    sim = run_json(str(path), *(a for o in limit for a in ("--set", o)))["cgroups"]["app"]
    for side in (kernel, sim):
        assert 200_000 <= side["usage_usec"] <= 300_000, (kernel, sim)
        assert side["nr_throttled"] >= 8, (kernel, sim)
