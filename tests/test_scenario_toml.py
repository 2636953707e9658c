"""Python's one scenario writer: `_native.scenario_toml`, the core's
`ScenarioToml` (format/write.rs) over a dict."""

from __future__ import annotations

import json
import tomllib

import pytest

from throttlelab import _native

SCENARIO = {
    "name": "written",
    "duration_s": 2.5,
    "seed": 3,
    "machine": {"cpus": 2, "hz": 250},
    "kernel": {"profile": "6.12", "features": ["slush_fund"]},
    "cgroup": [{"name": "app", "period_us": 10000, "quota_us": 5000}],
    "task": [
        {"name": "a", "cgroup": "app", "threads": 2, "phases": [{"run_us": 6000}, {"sleep_us": 4000}]},
        {"name": "b", "cgroup": "app", "windows": [[0, 1, 0.5], [1, 2.5, 0.25]]},
    ],
}


def test_a_dict_is_written_as_the_scenario_it_is():
    text = _native.scenario_toml("a test's scenario", SCENARIO)
    assert text.startswith("# a test's scenario\nname = \"written\"\nduration_s = 2.5\nseed = 3\n\n[machine]\n")
    assert tomllib.loads(text) == SCENARIO
    assert json.loads(_native.validate(text))["tasks"][0]["name"] == "a"


def test_notes_go_above_their_tables_after_the_blank_line():
    text = _native.scenario_toml("c", SCENARIO, {"kernel": "a release", "task": "the threads"})
    assert "\n\n# a release\n[kernel]\n" in text
    assert text.count("# the threads") == 1 and "\n\n# the threads\n[[task]]\nname = \"a\"" in text
    assert tomllib.loads(text) == SCENARIO


@pytest.mark.parametrize("value, words", [
    (None, "machine.cpus: TOML has no value for a NoneType"),
    ({1, 2}, "machine.cpus: TOML has no value for a set"),
    (2 ** 64, "machine.cpus: 18446744073709551616 is out of TOML's integer range"),
])
def test_a_value_toml_cannot_hold_is_refused_by_its_key(value, words):
    with pytest.raises(ValueError, match=words):
        _native.scenario_toml("c", {"machine": {"cpus": value}})


def test_a_key_that_is_not_text_or_a_note_without_its_table_is_refused():
    with pytest.raises(ValueError, match="machine: a key 1 that is not a str"):
        _native.scenario_toml("c", {"machine": {1: 2}})
    with pytest.raises(ValueError, match="kernel: no table to note"):
        _native.scenario_toml("c", {"machine": {"cpus": 2}}, {"kernel": "absent"})
