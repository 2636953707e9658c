"""Bad input: one line `throttlelab: error: ...` on stderr, exit code 2, no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from helpers import cli, scenario_text
from throttlelab import _native

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


@pytest.mark.parametrize("value", ["0", "-0.5", "1.01", "nan"])
def test_machine_work_speed_outside_0_to_1(write_scenario, value):
    msg = assert_error(run_file(write_scenario, machine=f"work_speed = {value}"), "machine.work_speed")
    assert "(0, 1]" in msg


@pytest.mark.parametrize("key", ["tick_irq_us", "idle_exit_us"])
@pytest.mark.parametrize("value", ["-1", "4000"])
def test_machine_latency_outside_one_tick(write_scenario, key, value):
    msg = assert_error(run_file(write_scenario, machine=f"{key} = {value}"), f"machine.{key}")
    assert "one tick" in msg


@pytest.mark.parametrize("value", ["0", "-5", "21", "nan"])
def test_machine_background_median_outside_0_to_the_mean(write_scenario, value):
    # The default background_us is 20: a log-normal's median is at most its mean.
    msg = assert_error(run_file(write_scenario, machine=f"background_p50_us = {value}"), "machine.background_p50_us")
    assert "machine.background_us = 20" in msg


@pytest.mark.parametrize("machine, key", [
    ("tick_late_share = 0.1", "machine.tick_late_us"),
    ("tick_late_us = 3000", "machine.tick_late_share"),
    ("tick_late_share = 1.0\ntick_late_us = 3000", "machine.tick_late_share"),
    ("tick_late_share = 0.1\ntick_late_us = 3990", "machine.tick_late_us"),
    ("tick_late_share = 0.1\ntick_late_us = 0", "machine.tick_late_us"),
    ("tick_late_together = 0.5", "machine.tick_late_together"),
    ("tick_late_share = 0.1\ntick_late_us = 3000\ntick_late_together = 1.5", "machine.tick_late_together"),
])
def test_machine_tick_late_together_within_a_tick(write_scenario, machine, key):
    # HZ=250: a tick of 4000 us, less the default jitter of 20 us.
    assert_error(run_file(write_scenario, machine=machine), key)


@pytest.mark.parametrize("value", ["-0.01", "0.2", "nan", '"x"'])
def test_machine_work_speed_cv_outside_0_to_a_tenth(write_scenario, value):
    assert_error(run_file(write_scenario, machine=f"work_speed_cv = {value}"), "machine.work_speed_cv")


@pytest.mark.parametrize("value", ["-0.5", "4.5", "nan"])
def test_service_cost_cv_outside_0_to_4(write_scenario, value):
    service = f'\n[[service]]\nname = "s"\ncgroup = "app"\nrate_per_s = 100\ncost_us = 1000\ncost_cv = {value}'
    msg = assert_error(run_file(write_scenario, task=service), "service.s.cost_cv")
    assert "[0, 4]" in msg


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


def test_task_cpus_outside_its_cgroups(write_scenario):
    # Accepted by validate and a panic in run before: both refuse it now.
    path = write_scenario(cgroup='cpus = "0"', task='cpus = "1"')
    for command in ("validate", "run"):
        assert_error(cli(command, path), "task.spinner.cpus", "no CPU of 1 is in its cgroup's cpus (0)")


def test_child_cpus_outside_parents(write_scenario):
    text = scenario_text(cgroup='cpus = "0"') + '\n[[cgroup]]\nname = "child"\nparent = "app"\ncpus = "0-1"\n'
    assert_error(cli("validate", write_scenario(text)), "cgroup.child.cpus", "parent's cpus (0)")


@pytest.mark.parametrize("cpus", ["0-4294967295", "0-18446744073709551615", "0-300000000"])
def test_huge_cpu_list_refused_without_expanding_it(write_scenario, cpus):
    assert_error(cli("validate", write_scenario(task=f'cpus = "{cpus}"')), "task.spinner.cpus", "below 8192")


@pytest.mark.parametrize("name", ["a\\nb", "a\\u001b[31mb", "a b"])
def test_names_are_plain_and_printed_escaped(write_scenario, name):
    text = scenario_text().replace('name = "spinner"', f'name = "{name}"')
    msg = assert_error(cli("run", write_scenario(text)), "task[0].name", "letters, digits, '_' or '-'")
    assert all(c.isprintable() for c in msg), msg


def test_scenario_name_charset(write_scenario):
    text = scenario_text().replace('name = "t"', 'name = "t\\u001b]0;x\\u0007"')
    msg = assert_error(cli("validate", write_scenario(text)), "name:", "ASCII letters")
    assert all(c.isprintable() for c in msg), msg


@pytest.mark.parametrize("path", ["/dev/zero", "/", "fifo"])
def test_trace_csv_must_be_a_regular_file(write_scenario, tmp_path, path):
    if path == "fifo":  # no writer: opening it for reading would block forever
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    text = scenario_text(phases="[]").replace("phases = []", f'trace_csv = "{path}"')
    assert_error(cli("validate", write_scenario(text)), "task.spinner.trace_csv", path, "give a regular file")


def test_totals_are_bounded(write_scenario):
    tasks = "".join(f'[[task]]\nname = "t{i}"\nthreads = 100000\nphases = [{{ run_us = 1000 }}]\n' for i in range(100))
    assert_error(cli("validate", write_scenario(scenario_text() + tasks)), "threads in all", "100000")
    day = scenario_text(top="sample_ms = 1").replace("duration_s = 0.5", "duration_s = 86400")
    tasks = "".join(f'[[task]]\nname = "t{i}"\nphases = [{{ run_us = 1000 }}]\n' for i in range(50))
    assert_error(cli("validate", write_scenario(day + tasks)), "sample_ms", "samples", "10000000")


def test_seed_takes_any_u64():
    result = cli("run", "two-spinners", "--json", "--set", "seed=18446744073709551615", "--set", "duration_s=0.1")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["seed"] == 18446744073709551615
    assert_error(cli("run", "two-spinners", "--set", "seed=18446744073709551616"), "seed", "0..=18446744073709551615")


def test_panic_is_one_line_exit_3(monkeypatch):
    def panics(*args):
        raise _native.PanicException("index out of bounds: the len is 0\nbut the index is 0")

    monkeypatch.setattr(_native, "run", panics)
    result = cli("run", "two-spinners")
    assert result.exit_code == 3, (result.exit_code, result.stderr)
    assert result.stdout == ""
    assert result.stderr == (
        "throttlelab: internal error: index out of bounds: the len is 0\\nbut the index is 0 (please report)\n"
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_interrupted_exit_codes(monkeypatch, sig):
    def interrupted(*args):
        # As the binding raises it: the signal's number in `signal`.
        e = _native.Interrupted(f"interrupted by {sig.name}; cgroups removed, workers killed")
        e.signal = int(sig)
        raise e

    monkeypatch.setattr(_native, "run", interrupted)
    result = cli("run", "two-spinners")
    assert result.exit_code == 128 + int(sig)  # 130, 143, 129, 131
    assert result.stderr == f"throttlelab: error: interrupted by {sig.name}; cgroups removed, workers killed\n"


def test_deadline_task_in_a_smaller_cpuset(write_scenario):
    task = 'policy = "deadline"\nruntime_us = 1000\nperiod_us = 10000'
    path = write_scenario(cgroup='cpus = "0"', task=task, phases="[{ run_us = 1000 }]")
    assert_error(cli("validate", path), "task.spinner.cgroup", "root domain", "cpus are 0")
