"""The acceptance driver's judgement (throttlelab.acceptance): how a row's
kernel runs are pooled and held against the simulator's seeds, and its
command's refusals. The runs themselves need real programs and an idle host,
so they are not tests."""

import gzip
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from throttlelab.acceptance import driver, programs
from throttlelab.metrics import percentile

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "acceptance.py"


def test_percentiles_are_nearest_rank():
    values = [float(x) for x in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99)) == (50.0, 99.0)
    assert percentile([], 99) == 0.0


def test_a_rows_percentiles_pool_its_runs_requests():
    # Two slow requests in one run of two: that run's own p99 is 100 ms, the
    # other's 1 (their mean 50.5); of the 200 requests together the p99 is
    # the 198th, 1 ms; three slow ones would make it 100.
    fast = [1.0] * 100
    two_slow = [1.0] * 98 + [100.0] * 2
    three_slow = [1.0] * 97 + [100.0] * 3
    assert driver.pooled_percentiles([two_slow, fast]) == {"p50_ms": 1.0, "p99_ms": 1.0}
    assert driver.pooled_percentiles([three_slow, fast]) == {"p50_ms": 1.0, "p99_ms": 100.0}
    assert driver.pooled_percentiles([[]]) == {}


def test_a_replays_percentiles_pool_its_processes_requests():
    # Four server processes of 25 requests each, one slow request (9 ms) in
    # each of three: each process's own p99 is its slowest, so their mean
    # would be 6 ms; of the 100 requests the p99 is the 99th, 9 ms.
    def process(slow_us):
        us = [1000] * (24 if slow_us else 25) + ([slow_us] if slow_us else [])
        return {"latencies_us": {"from_arrival": us, "from_start": [500] * 25}}

    tasks = [process(9000), process(9000), process(9000), process(None)]
    got = programs.request_percentiles(tasks, (50, 99))
    assert (got["p50_ms"], got["p99_ms"], len(got["latencies_ms"])) == (1.0, 9.0, 100)
    assert programs.request_percentiles(tasks, (99,), "from_start")["p99_ms"] == 0.5
    assert programs.request_percentiles([], (99,)) == {}


def test_the_verdicts_hold_the_issues_targets():
    kernel = [{"throttled_pct": t, "usage_cpus": 0.25} for t in (14.0, 16.0)]
    pooled = {"p99_ms": 40.0}

    def verdict(throttled_pct, usage_cpus, p99_ms=None):
        sim = {"throttled_pct": throttled_pct, "usage_cpus": usage_cpus}
        return driver.verdicts(kernel, pooled, [sim], {"p99_ms": p99_ms} if p99_ms else {})

    # Inside the kernel's range [14, 16], or within 3 points of its mean (15).
    assert verdict(15.9, 0.25)["throttled"] and verdict(17.9, 0.25)["throttled"]
    assert not verdict(18.1, 0.25)["throttled"] and not verdict(11.9, 0.25)["throttled"]
    # Usage within 5 %, the seeds' pooled p99 within 25 % of the runs', no p99 without one.
    assert verdict(15, 0.26)["usage"] and not verdict(15, 0.27)["usage"]
    assert verdict(15, 0.25, 49.0)["p99"] and not verdict(15, 0.25, 51.0)["p99"]
    assert verdict(15, 0.25)["p99"] is None


def test_sysbench_histograms_become_every_requests_latency():
    out = (
        "    events per second:    45.20\n"
        "Latency histogram (values are in milliseconds)\n"
        "       value  ------------- distribution ------------- count\n"
        "       5.570 |****************************************  3\n"
        "       5.670 |*************                            1\n"
        "      10.650 |*                                        1\n"
    )
    figures = programs.Sysbench.parse(out)
    assert figures["events_per_s"] == 45.2
    assert figures["latencies_ms"] == [5.57, 5.57, 5.57, 5.67, 10.65]
    assert (figures["p50_ms"], figures["p99_ms"]) == (5.57, 10.65)


def test_a_row_holds_the_pooled_seeds_against_the_pooled_runs():
    # The captured row's kernel p50 (3 ms) less its replay's (2 ms, pooled
    # over both seeds) is the latency outside the replay, 1 ms, added to
    # every predicted percentile; the seeds' requests are pooled, not kept.
    class Server:
        name = "server"

    captured = programs.Config("captured", 100_000, 50_000, 0, None)
    tighter = programs.Config("tighter quota", 100_000, 25_000, 0, None)
    seed = lambda ms: {"throttled_pct": 10.0, "usage_cpus": 0.3, "latencies_ms": ms}  # noqa: E731
    sims = {"captured": [seed([2.0] * 99 + [9.0]), seed([2.0] * 100)], "tighter quota": [seed([2.0] * 90 + [30.0] * 10) for _ in range(2)]}
    runs = {"captured": [{"throttled_pct": 10.0, "usage_cpus": 0.3, "p50_ms": 3.0}], "tighter quota": [{"throttled_pct": 11.0, "usage_cpus": 0.3}]}
    pooled = {"captured": {"p50_ms": 3.0, "p99_ms": 3.5}, "tighter quota": {"p50_ms": 3.0, "p99_ms": 30.0}}
    rows = driver.judged(Server(), [captured, tighter], runs, pooled, sims, {"capture": {}})
    assert [r["latency_outside_ms"] for r in rows] == [1.0, 1.0]
    assert rows[0]["sim_pooled"] == {"p50_ms": 3.0, "p99_ms": 3.0}
    assert rows[1]["sim_pooled"] == {"p50_ms": 3.0, "p99_ms": 31.0}
    assert rows[1]["verdict"] == {"throttled": True, "usage": True, "p99": True}
    assert all("latencies_ms" not in s for r in rows for s in r["sim"])


def test_rejudge_makes_a_runs_predictions_again_from_its_captures(tmp_path):
    # A kept capture of four run/sleep workers (2 CPUs, 0.6 CPUs of demand)
    # and a finished run of two rows: its captured limit (120 ms a 100 ms
    # period) and 70 ms. The predictions come back the same each time, and
    # the smaller quota throttles more.
    from throttlelab.terminal import Terminal

    (tmp_path / "acceptance-captures").mkdir()
    (tmp_path / "acceptance-captures" / "stress-ng.toml").write_text(
        'name = "capture"\nduration_s = 4\n[machine]\ncpus = 2\n[[cgroup]]\nname = "cap"\nperiod_us = 100000\nquota_us = 120000\n'
        '[[task]]\nname = "stress-ng-cpu"\ncgroup = "cap"\nthreads = 4\nstart_spread_us = 190000\n'
        "phases = [{ run_us = 29000 }, { sleep_us = 163000 }]\n"
    )
    captured = programs.Config("captured", 100_000, 120_000, 0, 4)
    tighter = programs.Config("tighter quota", 100_000, 70_000, 0, 4)
    row = lambda config: {  # noqa: E731
        "program": "stress-ng", "config": config.name, "configuration": asdict(config),
        "kernel": [{"throttled_pct": 0.0, "usage_cpus": 0.6}], "kernel_pooled": {}, "capture": {}, "demand": {},
    }
    doc = {"runs": 1, "seeds": 20, "duration_s": 2.0, "capture_s": 4.0, "rows": [row(captured), row(tighter)], "failed": {}}
    first = driver.rejudge(doc, tmp_path / "acceptance-captures", 3, Terminal())
    again = driver.rejudge(doc, tmp_path / "acceptance-captures", 3, Terminal())
    assert first["rows"] == again["rows"] and first["seeds"] == 3 and "rejudged" in first
    assert [len(r["sim"]) for r in first["rows"]] == [3, 3]
    throttled = [driver._mean([s["throttled_pct"] for s in r["sim"]]) for r in first["rows"]]
    assert throttled[1] > throttled[0], throttled


def test_rejudge_refuses_what_is_not_a_finished_run_in_one_line(tmp_path):
    bad = tmp_path / "acceptance.json"
    for text in ("{", '{"rows": [{"config": "captured"}]}', "[]"):
        bad.write_text(text)
        with pytest.raises(ValueError, match="not a finished run's acceptance.json"):
            driver.finished_run(bad)
    bad.write_text('{"rows": [{"program": "stress-ng"}]}')
    with pytest.raises(ValueError, match="no capture of stress-ng in .*acceptance-captures"):
        driver.finished_run(bad)
    (tmp_path / "acceptance-captures").mkdir()
    (tmp_path / "acceptance-captures" / "stress-ng.toml").write_text("")
    assert driver.finished_run(bad)["rows"] == [{"program": "stress-ng"}]


def test_a_users_own_program_file_gets_the_interfaces_defaults(tmp_path):
    # A class written to the interface alone, not subclassing Program, is
    # named by its `name` and gets the default limits and thread hooks.
    mine = tmp_path / "mine.py"
    mine.write_text('class Mine:\n    name = "mine"\n    def run(self, cgroup, threads, duration_s):\n        return {}\n\nPROGRAM = Mine\n')
    chosen = driver.resolve_programs(["sysbench", str(mine)])
    assert list(chosen) == ["sysbench", "mine"]
    program = chosen["mine"]()
    assert isinstance(program, programs.Program) and program.capture_limit == programs.Limit(100_000, 2.0)
    assert list(driver.resolve_programs([])) == ["sysbench", "stress-ng", "apache", "nginx", "pgbench"]


def test_phases_written_are_read_back_and_replicated_rotated(tmp_path):
    # Two workers captured, four asked for: the two kept, then each copied
    # once, each copy rotated by a third of its phases (the first copy of
    # three threads a worker) and left without its waits.
    sections = {
        "w-1": ["run_us 100", "sleep_us 900", "run_us 101", "sleep_us 901", "wait", "run_us 102", "sleep_us 902"],
        "w-2": ["run_us 200", "sleep_us 800", "run_us 201"],
    }
    programs.write_phases(tmp_path / "c.phases.gz", sections)
    assert programs.read_phases(tmp_path / "c.phases.gz") == sections
    (tmp_path / "c.toml").write_text(
        'name = "c"\n[[cgroup]]\nname = "g"\n'
        + "".join(f'\n[[task]]\nname = "{n}"\ncgroup = "g"\nloop = 1\nphases_file = "c.phases.gz"\n' for n in sections)
    )
    out = programs.replicate_workers(tmp_path / "c.toml", 4, tmp_path / "four.toml", lambda name: name.startswith("w-"))
    got = programs.read_phases(out.with_suffix(".phases.gz"))
    assert got == {
        **sections,
        "w-1-copy2": ["run_us 101", "sleep_us 901", "run_us 102", "sleep_us 902", "run_us 100", "sleep_us 900"],
        "w-2-copy3": ["sleep_us 800", "run_us 201", "run_us 200"],
    }
    assert out.read_text().count("[[task]]") == 4


def test_rejudge_refuses_a_run_of_a_program_it_does_not_know(tmp_path):
    doc = {"rows": [{"program": "mine"}]}
    with pytest.raises(driver.AcceptanceError, match="'mine', not built in"):
        driver.rejudge(doc, tmp_path, 1, None)


def assert_one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("throttlelab: error: "), done.stderr
    assert all(w in lines[0] for w in words), (words, lines[0])


@pytest.mark.parametrize(
    "args, words",
    [
        (["nosuch"], ["unknown program 'nosuch'"]),
        (["--runs", "0", "sysbench"], ["--runs"]),
        (["--rejudge", "{missing}"], ["not a finished run's acceptance.json"]),
        (["--rejudge", "{garbage}"], ["not a finished run's acceptance.json"]),
        (["--rejudge", "{no_captures}"], ["no capture of stress-ng"]),
        (["{not_python}"], ["no program loaded"]),
    ],
)
def test_accept_refuses_bad_input_in_one_line(tmp_path, args, words):
    files = {"missing": tmp_path / "missing.json", "garbage": tmp_path / "garbage.json", "no_captures": tmp_path / "run.json",
             "not_python": tmp_path / "prog.py"}
    files["garbage"].write_text("{\x07")
    files["no_captures"].write_text('{"rows": [{"program": "stress-ng"}]}')
    files["not_python"].write_text("PROGRAM = (")
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    done = subprocess.run([sys.executable, "-m", "throttlelab", "accept", "-o", str(tmp_path / "out"), *argv], capture_output=True, text=True)
    assert_one_line_error(done, *words)


def test_the_scripts_programs_option_names_the_commands_programs(tmp_path):
    # scripts/acceptance.py is the command with --programs a,b; unknown is refused before anything runs.
    done = subprocess.run([sys.executable, str(SCRIPT), "--programs", "sysbench,nosuch", "--out", str(tmp_path)], capture_output=True, text=True)
    assert_one_line_error(done, "unknown program 'nosuch'")
    assert not any(tmp_path.iterdir())


def test_a_second_run_is_refused_while_the_lock_is_held(tmp_path):
    # flock locks belong to open files: a second open conflicts even in one process.
    from throttlelab.acceptance.cgroup import LockHeld, run_lock

    path = tmp_path / "lock"
    with run_lock(path):
        assert path.read_text() == str(os.getpid())
        with pytest.raises(LockHeld, match=f"another real run \\(pid {os.getpid()}\\) holds {path}"):
            with run_lock(path):
                pass
    with run_lock(path):
        pass


def test_pgbench_deals_the_captured_requests_among_other_backends(tmp_path):
    # Two backends woken from outside, four asked for: every request (an
    # until_us and what follows up to the next) goes whole to one of the
    # four, each new backend starts as a captured one did, and the
    # postmaster (never woken from outside) stays as captured.
    from throttlelab.acceptance.pgbench import Program as Pgbench

    sections = {
        "postgres-1": ["run_us 50", "sleep_us 1000"],
        "postgres-2": ["run_us 7", "until_us 10", "run_us 100", "until_us 30", "run_us 300"],
        "postgres-3": ["run_us 8", "until_us 20", "run_us 200", "until_us 40", "run_us 400", "sleep_us 9"],
    }
    requests = [["until_us 10", "run_us 100"], ["until_us 20", "run_us 200"], ["until_us 30", "run_us 300"], ["until_us 40", "run_us 400", "sleep_us 9"]]
    programs.write_phases(tmp_path / "c.phases.gz", sections)
    (tmp_path / "c.toml").write_text(
        'name = "c"\n[[cgroup]]\nname = "g"\n'
        + "".join(f'\n[[task]]\nname = "{n}"\ncgroup = "g"\nloop = 1\nphases_file = "c.phases.gz"\n' for n in sections)
    )
    out = Pgbench.with_clients(tmp_path / "c.toml", 4, tmp_path / "four.toml", seed=1)
    got = programs.read_phases(out.with_suffix(".phases.gz"))
    assert list(got) == ["postgres-1", "backend-0", "backend-1", "backend-2", "backend-3"]
    assert got["postgres-1"] == sections["postgres-1"]
    dealt = []
    for i in range(4):
        lines = got[f"backend-{i}"]
        assert lines[0] == ["run_us 7", "run_us 8"][i % 2]
        cuts = [j for j, line in enumerate(lines) if line.startswith("until_us")] + [len(lines)]
        assert cuts[0] == 1, lines
        dealt += [lines[a:b] for a, b in zip(cuts, cuts[1:])]
    assert sorted(dealt) == requests
    text = out.read_text()
    assert text.count("[[task]]") == 5 and text.count('phases_file = "four.phases.gz"') == 5


def test_a_bad_phases_file_or_line_is_refused_in_one_line(tmp_path):
    # The driver reads and writes phases files through the core's module:
    # what it cannot read or write is one ValueError naming the line.
    bad = tmp_path / "bad.phases.gz"
    bad.write_bytes(gzip.compress(b"# throttlelab phases v1\n[a]\njump 3\n"))
    with pytest.raises(ValueError, match=r"bad.phases.gz: line 3: unknown phase \"jump 3\""):
        programs.read_phases(bad)
    with pytest.raises(ValueError, match=r"line 3: run_us: expected microseconds, got \"x\""):
        programs.write_phases(tmp_path / "c.phases.gz", {"a": ["run_us x"]})
    with pytest.raises(ValueError, match=r"a phase is one line"):
        programs.write_phases(tmp_path / "c.phases.gz", {"a": ["run_us 1\n[b]"]})
    assert not (tmp_path / "c.phases.gz").exists()
