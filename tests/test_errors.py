"""Bad input: one line `throttlelab: error: ...` on stderr, exit code 2, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import cli, scenario_text

PREFIX = "throttlelab: error: "


def assert_error(result, *words: str) -> str:
    """Check the error contract; the message must mention every word."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(PREFIX), lines[0]
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def run_file(write_scenario, **changes: str):
    return cli("run", write_scenario(**changes))


def test_toml_syntax_error(write_scenario):
    msg = assert_error(cli("run", write_scenario(top="duration_s = = 1")))
    assert "line" in msg


def test_unknown_top_level_key(write_scenario):
    assert_error(run_file(write_scenario, top="bogus_key = 1"), "bogus_key")


@pytest.mark.parametrize("section", ["cgroup", "task", "kernel", "machine"])
def test_unknown_key_in_section(write_scenario, section):
    msg = assert_error(run_file(write_scenario, **{section: "bogus_key = 1"}), "bogus_key")
    assert section in msg


def test_quota_below_1ms(write_scenario):
    assert_error(run_file(write_scenario, quota_us="500"), "quota_us")


@pytest.mark.parametrize("period", ["999", "1000001"])
def test_period_out_of_range(write_scenario, period):
    assert_error(run_file(write_scenario, period_us=period), "period_us")


def test_burst_above_quota(write_scenario):
    assert_error(run_file(write_scenario, burst_us="30000"), "burst_us")


@pytest.mark.parametrize("offset", ["-1", "10000"])
def test_period_timer_offset_outside_one_period(write_scenario, offset):
    msg = assert_error(run_file(write_scenario, period_us="10000", cgroup=f"period_timer_offset_us = {offset}"), "period_timer_offset_us")
    assert "one period" in msg


@pytest.mark.parametrize("key", ["tick_irq_us", "idle_exit_us"])
@pytest.mark.parametrize("value", ["-1", "4000"])
def test_machine_latency_outside_one_tick(write_scenario, key, value):
    msg = assert_error(run_file(write_scenario, machine=f"{key} = {value}"), f"machine.{key}")
    assert "one tick" in msg


def test_hz_not_a_kernel_value(write_scenario):
    assert_error(run_file(write_scenario, hz="200"), "hz")


def test_unknown_profile(write_scenario):
    assert_error(run_file(write_scenario, profile='"3.10"'), "profile")


def test_unknown_feature(write_scenario):
    assert_error(run_file(write_scenario, features='["warp_drive"]'), "features")


def test_task_in_unknown_cgroup(write_scenario):
    assert_error(run_file(write_scenario, task_cgroup='"nope"'), "cgroup", "nope")


def test_unknown_parent(write_scenario):
    assert_error(run_file(write_scenario, cgroup='parent = "nope"'), "parent", "nope")


def test_duplicate_cgroup_names(write_scenario):
    text = scenario_text() + '\n[[cgroup]]\nname = "app"\n'
    assert_error(cli("run", write_scenario(text)), "app")


@pytest.mark.parametrize(
    "phases", ["[{ run_us = 1000, sleep_us = 1000 }]", "[{}]"], ids=["two-keys", "no-key"]
)
def test_bad_phase(write_scenario, phases):
    assert_error(run_file(write_scenario, phases=phases), "phases")


def test_negative_threads(write_scenario):
    assert_error(run_file(write_scenario, threads="-1"), "threads")


def test_set_without_equals():
    assert_error(cli("run", "two-spinners", "--set", "seed"), "--set", "seed")


def test_set_on_unknown_cgroup():
    assert_error(cli("run", "two-spinners", "--set", "cgroup.nope.quota_us=5000"), "nope")


def test_set_invalid_value():
    assert_error(cli("run", "two-spinners", "--set", "machine.hz=200"), "hz")


def test_missing_file(tmp_path):
    path = str(tmp_path / "absent.toml")
    assert_error(cli("run", path), path)


def test_unknown_builtin_suggests_close_match():
    assert_error(cli("run", "two-spiners"), "two-spiners", "two-spinners")


def test_validate_reports_errors_too(write_scenario):
    assert_error(cli("validate", write_scenario(quota_us="500")), "quota_us")


def test_usage_error_is_one_line():
    assert_error(cli("run", "--no-such-option"), "--no-such-option")


def test_module_entry_point_reports_error_without_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "throttlelab", "run", "two-spiners"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(PREFIX) and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
