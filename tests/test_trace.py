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


# --- windows ------------------------------------------------------------------


def _ns(us: float) -> int:
    return round(us * 1e3)


def clipped(events: list[dict], from_ns: int, to_ns: int) -> dict:
    """What a window [from_ns, to_ns] of a whole-run trace must show: slices cut to
    it, each counter's level in force at its start then its changes, instants in it."""
    slices, counters, marks = set(), defaultdict(list), []
    for e in events:
        if e["ph"] == "X":
            start, end = max(_ns(e["ts"]), from_ns), min(_ns(e["ts"] + e["dur"]), to_ns)
            if end > start:
                slices.add((e["tid"], e["name"], start, end))
        elif e["ph"] == "C":
            counters[e["name"]].append((_ns(e["ts"]), e["args"]["ms"]))
        elif e["ph"] == "i" and from_ns <= _ns(e["ts"]) <= to_ns:
            marks.append((e["name"], _ns(e["ts"])))
    levels = {}
    for name, steps in counters.items():
        before = [level for t, level in steps if t < from_ns]
        levels[name] = ([(from_ns, before[-1])] if before else []) + [(t, v) for t, v in steps if from_ns <= t <= to_ns]
    return {"slices": slices, "counters": levels, "instants": sorted(marks)}


def test_a_window_keeps_what_the_whole_trace_shows_in_it(tmp_path, events):
    window = write_trace(tmp_path, "two-spinners", "--set", "duration_s=0.5", "--from-s", "0.2", "--to-s", "0.35")
    got = clipped(window, 200_000_000, 350_000_000)
    assert got == clipped(events, 200_000_000, 350_000_000)
    # Tracks start with the state at the window's start: every CPU busy at once, every pool a level there.
    assert {(tid, start) for tid, _, start, _ in got["slices"] if start == 200_000_000} == {(0, 200_000_000), (1, 200_000_000)}
    assert all(steps[0][0] == 200_000_000 for steps in got["counters"].values())
    assert max(e["ts"] + e.get("dur", 0) for e in window if "ts" in e) <= 350_000 + 1e-6


def test_the_native_side_holds_back_only_the_state_before_the_window():
    from throttlelab.timeline import TracedRun

    run = TracedRun(cli_text("two-spinners"), ["duration_s=2"], from_ns=1_900_000_000)
    before = [r for _, chunk in run for r in chunk["records"] if r["t_ns"] < 1_900_000_000]
    # At most: per CPU the running thread and each group's throttling, per group and CPU its pools.
    cpus, groups = 2, 2
    assert 0 < len(before) <= cpus + cpus * groups + groups * (cpus + 1)
    assert run.output()["duration_s"] == 2


def cli_text(name: str) -> str:
    from throttlelab.scenarios import load_scenario_text

    return load_scenario_text(name)[0]


@pytest.mark.parametrize("window", [("--from-s", "1", "--to-s", "1"), ("--from-s", "2", "--to-s", "1")])
def test_an_empty_or_inverted_window_is_refused(tmp_path, window):
    assert_error(cli("trace", "two-spinners", *window, "-o", str(tmp_path / "t.json")), "empty window")
    assert not (tmp_path / "t.json").exists()


def test_a_window_after_the_run_is_refused(tmp_path):
    assert_error(cli("trace", "two-spinners", "--from-s", "7", "-o", str(tmp_path / "t.json")), "ends at 6 s")


def test_progress_is_in_simulated_seconds_on_stderr(tmp_path):
    result = cli("trace", "two-spinners", "--set", "duration_s=1", "-o", str(tmp_path / "t.json"))
    assert result.exit_code == 0
    assert result.stderr.splitlines()[-1].startswith("trace: simulated s: 1/1 (")


def test_a_run_that_goes_on_is_cut_and_says_how_to_widen(tmp_path):
    result = cli("trace", "two-spinners", "--set", "duration_s=200", "--from-s", "59.9", "-o", str(tmp_path / "t.json"))
    assert result.exit_code == 0, result.stderr
    assert "the trace stops there (--to-s widens it)" in result.stderr
    assert "59.9-119.9 s" in result.stdout
