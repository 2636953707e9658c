"""`scenarios`, `validate` and `bench`, and the built-in scenario files."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import throttlelab
from throttlelab import _native
from helpers import cli, scenario_text
from throttlelab.scenarios import description


def test_builtins_include_two_spinners():
    assert "two-spinners" in throttlelab.builtin_names()


@pytest.mark.parametrize("name", throttlelab.builtin_names())
def test_builtin_opens_with_description(name):
    text, origin = throttlelab.load_scenario_text(name)
    assert text.startswith("# ") and description(text)
    assert name in origin


def test_scenarios_lists_builtins_with_descriptions():
    result = cli("scenarios")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == len(throttlelab.builtin_names())
    spinners = next(line for line in lines if line.startswith("two-spinners "))
    assert "2-CPU" in spinners


def test_scenarios_show_prints_a_builtin_that_runs_as_a_file(tmp_path):
    result = cli("scenarios", "show", "two-spinners")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == throttlelab.load_scenario_text("two-spinners")[0]
    path = tmp_path / "mine.toml"
    path.write_text(result.stdout)
    mine, builtin = (json.loads(cli("run", "--json", arg).stdout) for arg in (str(path), "two-spinners"))
    del mine["engine"], builtin["engine"]  # the wall time; everything else is the same for a seed
    assert mine == builtin


def test_scenarios_show_unknown_name_is_one_line_exit_2():
    result = cli("scenarios", "show", "two-spiners")
    assert result.exit_code == 2
    assert result.stderr == "throttlelab: error: no built-in scenario 'two-spiners'; did you mean two-spinners?\n"


@pytest.mark.parametrize("name", throttlelab.builtin_names())
def test_validate_every_builtin(name):
    result = cli("validate", name)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("ok: ")


def test_validate_file_counts(write_scenario):
    result = cli("validate", write_scenario())
    assert result.stdout == "ok: t (1 cgroups, 1 tasks)\n"


def test_validate_applies_overrides(write_scenario):
    result = cli("validate", write_scenario(), "--set", "cgroup.app.quota_us=500")
    assert result.exit_code == 2 and "quota_us" in result.stderr


def test_bench_json():
    result = cli("bench", "--json", "two-spinners")
    assert result.exit_code == 0, result.stderr
    (record,) = json.loads(result.stdout)
    assert record["scenario"] == "two-spinners"
    assert record["sim_s"] == 6.0
    assert record["wall_s"] > 0 and record["events"] > 0
    assert record["events_per_s"] > 0 and record["speedup"] > 0
    assert record["sim_s_per_wall_s"] == pytest.approx(6.0 / record["wall_s"])
    assert record["events_per_s"] == pytest.approx(record["events"] / record["wall_s"])
    # ru_maxrss of a fresh process per scenario: before its first run, and after its runs.
    assert record["peak_rss_mb"] >= record["base_rss_mb"] > 1
    assert record["runs"] == 1


def test_bench_busy_builtins_cover_8_64_and_256_cpus():
    for cpus in (8, 64, 256):
        doc = json.loads(_native.validate(throttlelab.load_scenario_text(f"bench-busy-{cpus}cpu")[0], []))
        assert doc["machine"]["cpus"] == cpus


def test_bench_refuses_a_bad_name_or_runs():
    for args, word in ((("no-such-scenario",), "no-such-scenario"), (("--runs", "0", "two-spinners"), "--runs")):
        result = cli("bench", *args)
        assert result.exit_code == 2 and word in result.stderr, args
        assert result.stderr.startswith("throttlelab: error:") and result.stderr.count("\n") == 1, result.stderr


def test_bench_table():
    result = cli("bench", "two-spinners")
    assert result.exit_code == 0, result.stderr
    assert "two-spinners" in result.stdout and "events/s" in result.stdout


def test_module_entry_point_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "throttlelab", "run", "--json", "two-spinners"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["scenario"] == "two-spinners"


def test_version():
    result = cli("--version")
    assert result.exit_code == 0 and throttlelab.__version__ in result.stdout


def test_scenario_text_is_passed_through():
    text = scenario_text()
    assert throttlelab.scenario_text(text) == text
