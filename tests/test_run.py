"""`throttlelab run`: output schema, determinism and `--set` overrides."""

from __future__ import annotations

import json
import re

import throttlelab
from helpers import cli, run_json, scenario_text

CGROUP_KEYS = {
    "usage_usec": int, "nr_periods": int, "nr_throttled": int, "throttled_usec": int,
    "nr_bursts": int, "burst_usec": int, "throttled_ratio": float,
}
TASK_KEYS = {"threads": int, "cpu_usec": int, "work_usec": int}


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def test_json_schema_of_builtin():
    doc = run_json("two-spinners")
    assert doc["scenario"] == "two-spinners"
    assert doc["backend"] == "sim"
    assert doc["profile"] == "6.18"
    assert doc["seed"] == 1
    assert isinstance(doc["duration_s"], float) and doc["duration_s"] == 6.0
    cg = doc["cgroups"]["app"]
    for key, typ in CGROUP_KEYS.items():
        assert isinstance(cg[key], typ), key
    assert 0.0 <= cg["throttled_ratio"] <= 1.0
    assert cg["nr_throttled"] <= cg["nr_periods"]
    task = doc["tasks"]["spinner"]
    for key, typ in TASK_KEYS.items():
        assert isinstance(task[key], typ), key
    assert task["threads"] == 2
    assert task["finished_s"] is None or isinstance(task["finished_s"], float)
    assert isinstance(doc["engine"]["events"], int) and doc["engine"]["events"] > 0
    assert isinstance(doc["engine"]["wall_s"], float)


def test_two_spinners_are_limited_to_the_quota():
    cg = run_json("two-spinners")["cgroups"]["app"]
    # 20 ms per 10 ms period on 2 CPUs: at most 2 CPUs' worth of usage in 6 s.
    assert 0 < cg["usage_usec"] <= 12_000_000 * 1.01


def test_json_is_one_line():
    result = cli("run", "--json", "two-spinners")
    assert result.stdout.count("\n") == 1 and result.stdout.endswith("\n")


def test_service_reports_latency(write_scenario):
    path = write_scenario(
        scenario_text()
        + '\n[[service]]\nname = "svc"\ncgroup = "app"\nworkers = 2\narrival = "poisson"\n'
        "rate_per_s = 200\ncost_us = 2000\n"
    )
    svc = run_json(path)["tasks"]["svc"]
    assert isinstance(svc["requests"], int) and svc["requests"] > 0
    lat = svc["latency_us"]
    for key in ("p50", "p90", "p99", "max"):
        assert _is_number(lat[key]), key
    assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    human = cli("run", path)
    assert human.exit_code == 0 and "p99" in human.stdout


def test_human_output_names_cgroup_and_task():
    result = cli("run", "two-spinners")
    assert result.exit_code == 0, result.stderr
    for word in ("two-spinners", "6.18", "app", "spinner", "throttled %", "events"):
        assert word in result.stdout, word


def _without_engine(stdout: str) -> str:
    stripped, n = re.subn(r',"engine":\{[^{}]*\}', "", stdout)
    assert n == 1, stdout
    return stripped


def test_same_seed_is_byte_identical_apart_from_engine():
    first = cli("run", "--json", "two-spinners").stdout
    second = cli("run", "--json", "two-spinners").stdout
    assert _without_engine(first) == _without_engine(second)
    assert json.loads(_without_engine(first)) == {k: v for k, v in json.loads(first).items() if k != "engine"}


def test_seed_override():
    assert run_json("two-spinners", "--set", "seed=2")["seed"] == 2


def test_removing_the_quota_removes_throttling():
    cg = run_json("two-spinners", "--set", "cgroup.app.quota_us=-1")["cgroups"]["app"]
    assert cg["nr_throttled"] == 0 and cg["throttled_usec"] == 0


def test_smaller_quota_throttles():
    cg = run_json("two-spinners", "--set", "cgroup.app.quota_us=5000")["cgroups"]["app"]
    assert cg["nr_throttled"] > 0
    # 5 ms per 10 ms period: about half a CPU over 6 s.
    assert cg["usage_usec"] <= 3_000_000 * 1.1


def test_profile_override():
    assert run_json("two-spinners", "--set", 'kernel.profile="5.4"')["profile"] == "5.4"


def test_cpus_override():
    doc = run_json("two-spinners", "--set", "machine.cpus=1", "--set", "cgroup.app.quota_us=-1")
    # One CPU cannot give more than 6 s of CPU time in 6 s.
    assert doc["cgroups"]["app"]["usage_usec"] <= 6_000_000 * 1.01


def test_python_api_accepts_name_path_and_text(write_scenario):
    text = scenario_text()
    by_text = throttlelab.run(text)
    by_path = throttlelab.run(write_scenario(text))
    for doc in (by_text, by_path):
        doc.pop("engine")
    assert by_text == by_path
    assert throttlelab.run("two-spinners", set=["seed=3"])["seed"] == 3


def test_default_scenario():
    from throttlelab.cli import DEFAULT_SCENARIO

    assert DEFAULT_SCENARIO in throttlelab.builtin_names()
    assert run_json()["scenario"] == DEFAULT_SCENARIO


def test_the_limit_is_beside_its_throttling():
    """The JSON carries each cgroup's effective limit (after every write); the
    tables show it as cpu.max with CPUs and millicores."""
    cg = run_json("two-spinners", "--set", "duration_s=1")["cgroups"]["app"]
    assert cg["limit"] == {"quota_us": 20000, "period_us": 10000, "burst_us": 0}
    text = throttlelab.scenario_text("two-spinners") + '\n[[write]]\ncgroup = "app"\nat_ms = 500\nquota_us = 15000\n'
    rewritten = throttlelab.run(text, set=["duration_s=1", "cgroup.app.burst_us=5000"])["cgroups"]["app"]
    assert rewritten["limit"] == {"quota_us": 15000, "period_us": 10000, "burst_us": 5000}
    unlimited = run_json("two-spinners", "--set", "duration_s=1", "--set", "cgroup.app.quota_us=max")["cgroups"]["app"]
    assert unlimited["limit"]["quota_us"] is None and unlimited["nr_throttled"] == 0
    table = cli("run", "two-spinners", "--set", "duration_s=1").stdout
    assert "cpu.max 20000 10000 (2 CPUs, 2000m)" in " ".join(table.split())


def test_one_vocabulary_across_commands():
    """cpu.stat's names and the same unit for throttled time in run, sweep and
    reproduce; --runs repeats and -o/--out writes wherever a command does either."""
    run_table = cli("run", "two-spinners", "--set", "duration_s=1").stdout
    sweep_table = cli("sweep", "two-spinners", "--grid", "seed=1,2", "--set", "duration_s=1").stdout
    # (A long header takes two lines.)
    for words in ("nr_periods", "nr_throttled", "throttled %", "throttled ms", "(all CPUs)"):
        assert words in run_table, words
    assert "app throttled ms" in sweep_table and "(all CPUs)" in sweep_table
    from throttlelab.cli import main

    def options(command: str) -> set[str]:
        return {opt for p in main.commands[command].params for opt in getattr(p, "opts", [])}

    for command in ("bench", "compare", "advise", "explain"):
        assert "--runs" in options(command) and not {"--repeat", "--seeds"} & options(command), command
    for command in ("trace", "report", "sweep"):
        assert {"-o", "--out"} <= options(command) and "--csv" not in options(command), command
