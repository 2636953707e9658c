"""`throttlelab trace`: the Chrome/Perfetto JSON trace is well formed."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from helpers import cli
from test_errors import assert_error

#: Keys every event of a phase must carry (Chrome trace event format).
REQUIRED = {
    "M": {"name", "ph", "pid", "args"},
    "X": {"name", "ph", "pid", "tid", "ts", "dur"},
    "C": {"name", "ph", "pid", "ts", "args"},
    "i": {"name", "ph", "pid", "ts", "s"},
}


def write_trace(tmp_path, *args: str) -> list[dict]:
    path = tmp_path / "trace.json"
    result = cli("trace", *args, "-o", str(path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"wrote {path}")
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ns"
    return doc["traceEvents"]


@pytest.fixture(scope="module")
def events(tmp_path_factory) -> list[dict]:
    # Throttles every other period, with kernel background noise on both CPUs.
    return write_trace(tmp_path_factory.mktemp("trace"), "two-spinners", "--set", "duration_s=0.5")


def test_every_event_has_the_keys_of_its_phase(events):
    for event in events:
        assert REQUIRED[event["ph"]] <= set(event), event
        if "ts" in event:
            assert isinstance(event["ts"], float) and event["ts"] >= 0


def test_slices_have_a_duration_and_never_overlap_on_a_cpu(events):
    by_cpu = defaultdict(list)
    for event in events:
        if event["ph"] == "X":
            assert event["dur"] >= 0
            by_cpu[(event["pid"], event["tid"])].append((event["ts"], event["ts"] + event["dur"]))
    assert len(by_cpu) == 2
    for slices in by_cpu.values():
        slices.sort()
        for (_, end), (start, _) in zip(slices, slices[1:]):
            assert start >= end - 1e-9


def test_tasks_and_throttling_appear(events):
    names = {e["name"] for e in events if e["ph"] == "X"}
    assert {"spinner", "throttled app"} <= names
    assert any(e["name"] == "refill app" for e in events if e["ph"] == "i")


def test_counters_are_numbers(events):
    counters = [e for e in events if e["ph"] == "C"]
    assert {e["name"] for e in counters} == {"app global pool", "app local pool CPU 0", "app local pool CPU 1"}
    for event in counters:
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in event["args"].values())


def test_every_tid_and_pid_is_named(events):
    threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    processes = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    for event in events:
        assert event["pid"] in processes
        if "tid" in event:
            assert (event["pid"], event["tid"]) in threads


def test_one_track_per_cpu_of_88(tmp_path):
    events = write_trace(tmp_path, "chiluk-fibtest", "--set", "duration_s=0.3")
    tids = {e["tid"] for e in events if e["ph"] == "X"}
    assert len(tids) == 88
    assert any(e["name"].startswith("throttled fibtest") for e in events if e["ph"] == "X")


def test_unwritable_output():
    assert_error(cli("trace", "two-spinners", "-o", "/nonexistent-dir/trace.json"), "cannot write")


def test_unknown_scenario(tmp_path):
    assert_error(cli("trace", "no-such-scenario", "-o", str(tmp_path / "t.json")), "no-such-scenario")
