"""The runner loses no finished run: a run whose worker is killed (SIGKILL, as
the OOM killer sends) runs again on a fresh worker, and fails in one line that
names it after RETRIES more deaths; `sweep -o FILE` keeps each row as it
finishes, so that Ctrl-C, SIGTERM, SIGHUP or a full disk keeps the rows done,
and `--resume` runs only the rest. Real signals on real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import cli
from throttlelab import runner as runner_module
from throttlelab.runner import RETRIES, Runner, RunFailed

#: 20 runs of about 0.4 s each (when the host is idle), two at a time.
SWEEP = ["sweep", "request-service", "--set", "duration_s=2400", "--grid", "cgroup.app.quota_us=60000,80000,100000,120000,140000",
         "--grid", "seed=1,2,3,4", "--workers", "2"]
RUNS = 20


def _square_dying_once(marker_dir: str, i: int, dies: int) -> int:
    """i * i; call `dies` kills its own process with SIGKILL the first time."""
    marker = Path(marker_dir) / f"died-{i}"
    if i == dies and not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return i * i


def _square_dying_always(i: int, dies: int) -> int:
    if i == dies:
        os.kill(os.getpid(), signal.SIGKILL)
    return i * i


def _children(pid: int) -> list[int]:
    return [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]


def test_a_run_whose_worker_is_killed_runs_again_on_a_fresh_worker(tmp_path):
    with Runner(workers=2) as runner:
        assert runner.map(_square_dying_once, [(str(tmp_path), i, 3) for i in range(6)]) == [i * i for i in range(6)]
        # The pool goes on after it.
        assert runner.map(_square_dying_once, [(str(tmp_path), i, -1) for i in range(4)]) == [0, 1, 4, 9]
    assert (tmp_path / "died-3").exists()


def test_a_run_killed_on_every_try_fails_naming_the_run_and_the_signal():
    before = set(_children(os.getpid()))  # what earlier tests started here (Ray's)
    with Runner(workers=2) as runner, pytest.raises(RunFailed) as failed:
        runner.map(_square_dying_always, [(i, 2) for i in range(5)], labels=[f"seed={i}" for i in range(5)])
    assert str(failed.value) == f"run 3 of 5 (seed=2) failed: its worker was killed by signal 9 (SIGKILL), {1 + RETRIES} times"
    assert failed.value.signal == signal.SIGKILL
    assert set(_children(os.getpid())) - before == set()  # no worker left behind


#: This test process: a run the runner makes here (one run alone) must not kill it.
_PYTEST = os.getpid()


def _simulate_dying_once(text, overrides=(), like_host=None, placed=False, stop=None):
    """The simulation, but the first run in a worker kills the worker (SIGKILL)."""
    marker = Path(os.environ["THROTTLELAB_TEST_MARKER"])
    if os.getpid() == _PYTEST:
        return _SIMULATE(text, overrides, like_host, placed, stop)
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return _SIMULATE(text, overrides, like_host, placed, stop)
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


_SIMULATE = runner_module.simulate


@pytest.mark.parametrize(
    "command",
    [
        ["advise", "two-spinners", "--cgroup", "app", "--max-throttled", "5%", "--runs", "2", "--json"],
        ["explain", "two-spinners", "--runs", "2", "--json"],
        ["reproduce", "chiluk-fibtest", "--json"],
        ["sweep", "two-spinners", "--grid", "seed=1,2,3", "--json"],
    ],
    ids=lambda c: c[0],
)
def test_every_command_on_the_runner_runs_a_killed_run_again(command, tmp_path, monkeypatch):
    """advise, explain, reproduce and sweep (compare's simulator side is the
    same Runner.run_many) give what they give unkilled."""
    want = cli(*command)
    assert want.exit_code in (0, 1), want.stderr
    monkeypatch.setenv("THROTTLELAB_TEST_MARKER", str(tmp_path / "died"))
    monkeypatch.setattr(runner_module, "simulate", _simulate_dying_once)
    got = cli(*command)
    assert (tmp_path / "died").exists(), "no worker was killed"
    assert (got.exit_code, got.stdout) == (want.exit_code, want.stdout), got.stderr


def _simulate_dying_always(text, overrides=(), like_host=None, placed=False, stop=None):
    if "seed=2" in overrides and os.getpid() != _PYTEST:
        os.kill(os.getpid(), signal.SIGKILL)
    return _SIMULATE(text, overrides, like_host, placed, stop)


def test_sweep_whose_run_is_killed_on_every_try_says_so_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(runner_module, "simulate", _simulate_dying_always)
    out = tmp_path / "rows.csv"
    result = cli("sweep", "two-spinners", "--grid", "seed=1,2,3", "--workers", "2", "-o", str(out))
    assert result.exit_code == 128 + signal.SIGKILL
    assert result.stderr.splitlines()[-1] == (
        f"throttlelab: error: run 2 of 3 (seed=2) failed: its worker was killed by signal 9 (SIGKILL), {1 + RETRIES} times"
    )
    assert all(line.startswith("sweep: ") for line in result.stderr.splitlines()[:-1])
    # The runs that finished are in the file.
    rows = out.read_text().splitlines()
    assert len(rows) - 1 in (0, 1, 2) and all(not r.startswith("2,") for r in rows[1:])


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> bytes:
    """The whole sweep's CSV, run without a fault."""
    out = tmp_path_factory.mktemp("reference") / "rows.csv"
    result = cli(*SWEEP, "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"wrote {out}: {RUNS} rows\n"
    return out.read_bytes()


def _start(out: Path, *extra: str) -> subprocess.Popen:
    """The sweep in a process group of its own, as a shell runs a command."""
    return subprocess.Popen(
        [sys.executable, "-m", "throttlelab", *SWEEP, "-o", str(out), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def _rows(path: Path) -> int:
    return max(0, len(path.read_text().splitlines()) - 1) if path.exists() else 0


def _wait_for_rows(proc: subprocess.Popen, path: Path, n: int) -> None:
    deadline = time.monotonic() + 300  # a hang guard: on a loaded host 10 rows took over 60 s
    while _rows(path) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{n} rows: not within 300 s"
        time.sleep(0.005)


def test_sweep_whose_worker_is_killed_writes_every_row(reference, tmp_path):
    """kill -9 of a pool process in the middle: every row, identical."""
    out = tmp_path / "rows.csv"
    proc = _start(out)
    _wait_for_rows(proc, out, 1)
    victim = _children(proc.pid)[0]
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert stdout == f"wrote {out}: {RUNS} rows\n"
    assert out.read_bytes() == reference


def _kept(reference: bytes, path: Path) -> list[str]:
    """The rows of `path`, each checked to be the reference's row of its grid values."""
    want = {tuple(line.split(",")[:2]): line for line in reference.decode().splitlines()[1:]}
    lines = path.read_text().splitlines()
    assert lines[0] == reference.decode().splitlines()[0]
    for line in lines[1:]:
        assert want[tuple(line.split(",")[:2])] == line
    return lines[1:]


@pytest.mark.parametrize("sig, at", [(signal.SIGINT, 2), (signal.SIGINT, 10), (signal.SIGINT, 18), (signal.SIGTERM, 10), (signal.SIGHUP, 10)])
def test_an_interrupted_sweep_keeps_its_rows_and_resume_runs_the_rest(reference, tmp_path, sig, at):
    """Ctrl-C (to the whole process group, as a terminal sends it), kill or a
    closed terminal after `at` of 20 rows (10, 50 and 90 %; when the 18th row
    is seen the last two runs are under way): exit 128 + the signal, one line with
    the count, the rows in the file each whole and right; --resume then writes
    the file the uninterrupted sweep writes."""
    out = tmp_path / "rows.csv"
    proc = _start(out)
    _wait_for_rows(proc, out, at)
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, stderr
    kept = _kept(reference, out)
    assert stdout == ""
    *progress, last = stderr.splitlines()  # progress lines ("sweep: 6/20 (1 s)"), then one line
    assert all(line.startswith("sweep: ") or not line for line in progress), stderr
    assert last == f"throttlelab: error: interrupted by {signal.Signals(sig).name}: {len(kept)} of {RUNS} rows kept in {out}; --resume runs the rest"
    assert at <= len(kept) < RUNS
    assert _children(proc.pid) == [] if Path(f"/proc/{proc.pid}").exists() else True
    resumed = _start(out, "--resume")
    stdout, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr
    assert stdout == f"wrote {out}: {RUNS} rows ({len(kept)} from before)\n"
    assert out.read_bytes() == reference


def test_resume_runs_again_a_row_cut_off_and_nothing_when_all_are_there(reference, tmp_path):
    out = tmp_path / "rows.csv"
    lines = reference.decode().splitlines(keepends=True)
    out.write_text("".join(lines[:4]) + lines[4][:10])  # a kill in the middle of a line
    result = cli(*SWEEP, "-o", str(out), "--resume")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"wrote {out}: {RUNS} rows (3 from before)\n"
    assert out.read_bytes() == reference
    result = cli(*SWEEP, "-o", str(out), "--resume")
    assert result.stdout == f"wrote {out}: {RUNS} rows ({RUNS} from before)\n"
    assert out.read_bytes() == reference


@pytest.mark.parametrize(
    "content, message",
    [
        ("seed,cgroup.app.quota_us\n", "--resume: {out} is not this sweep's file: its columns start seed,cgroup.app.quota_us, this grid's are cgroup.app.quota_us,seed"),
        ("cgroup.app.quota_us,seed,x\n60000,7,1\n", "--resume: {out} line 2 is not a row of this grid (60000,7)"),
        ("cgroup.app.quota_us,seed,x\n60000,1,1\n60000,1,1\n", "--resume: {out} line 3 repeats a row (60000,1)"),
        ("cgroup.app.quota_us,seed,x\n60000,1\n", "--resume: {out} line 2: 2 fields, the header has 3"),
        # The grid's columns, but not the metrics a run of this scenario gives: refused at the first new row.
        ("cgroup.app.quota_us,seed,x\n", "--resume: {out} is not this sweep's file: its columns differ from this run's (column 3 is x, this run's machine.background_per_s)"),
        (b"\xff\xfe", "--resume: cannot read {out}: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
    ],
)
def test_resume_of_another_file_is_refused_in_one_line(tmp_path, content, message):
    out = tmp_path / "rows.csv"
    (out.write_bytes if isinstance(content, bytes) else out.write_text)(content)
    before = out.read_bytes()
    result = cli(*SWEEP[:-2], "--workers", "1", "-o", str(out), "--resume")
    assert result.exit_code == 2
    assert result.stderr == f"throttlelab: error: {message.format(out=out)}\n"
    assert out.read_bytes() == before


def test_resume_needs_a_file():
    for args in ([], ["-o", "-"]):
        result = cli("sweep", "two-spinners", "--grid", "seed=1,2", "--resume", *args)
        assert result.exit_code == 2
        assert result.stderr.endswith("--resume needs --out FILE\n") and result.stderr.count("\n") == 1


def test_a_full_disk_is_one_line_that_says_what_is_kept():
    """/dev/full: every write fails with ENOSPC, as on a full filesystem."""
    result = cli("sweep", "two-spinners", "--grid", "seed=1,2", "--workers", "1", "-o", "/dev/full")
    assert result.exit_code == 2
    assert result.stderr == "throttlelab: error: cannot write /dev/full: No space left on device (0 of 2 rows kept; --resume runs the rest)\n"


@pytest.fixture
def ray_instance():
    yield
    import ray

    ray.shutdown()


def test_the_csv_is_the_same_under_ray(ray_instance, tmp_path):
    args = ["sweep", "two-spinners", "--grid", "seed=1,2,3", "--grid", "cgroup.app.quota_us=10000,20000"]
    local, on_ray = tmp_path / "local.csv", tmp_path / "ray.csv"
    assert cli(*args, "-o", str(local)).exit_code == 0
    result = cli(*args, "--executor", "ray", "--workers", "2", "-o", str(on_ray))
    assert result.exit_code == 0, result.stderr
    assert local.read_bytes() == on_ray.read_bytes()
    # A resumed file too.
    lines = local.read_text().splitlines(keepends=True)
    on_ray.write_text("".join(lines[:3]))
    result = cli(*args, "--executor", "ray", "--workers", "2", "-o", str(on_ray), "--resume")
    assert result.exit_code == 0, result.stderr
    assert local.read_bytes() == on_ray.read_bytes()


def test_a_file_another_sweep_writes_is_refused(tmp_path):
    """Two sweeps into one file would run each row twice and interleave them."""
    import fcntl

    out = tmp_path / "rows.csv"
    out.write_text("a row of another sweep\n")
    with open(out, "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        for resume in ([], ["--resume"]):
            result = cli("sweep", "two-spinners", "--grid", "seed=1,2", "-o", str(out), *resume)
            assert result.exit_code == 2
            assert result.stderr == f"throttlelab: error: {out} is being written by another sweep\n"
    assert out.read_text() == "a row of another sweep\n"


def test_ctrl_c_of_a_ray_sweep_keeps_its_rows_and_leaves_no_ray_process(reference, tmp_path):
    """Ctrl-C reaches the whole process group: Ray's own processes ignore it
    (before, the raylet died under the driver: exit 1, a C++ stack trace, 7 of
    Ray's processes left in the group)."""
    out = tmp_path / "rows.csv"
    proc = _start(out, "--executor", "ray")
    _wait_for_rows(proc, out, 2)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    kept = _kept(reference, out)
    assert stderr.splitlines()[-1] == f"throttlelab: error: interrupted by SIGINT: {len(kept)} of {RUNS} rows kept in {out}; --resume runs the rest"
    left = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert left == []


@pytest.mark.parametrize("command", [["run", "two-spinners", "--json"], ["sweep", "two-spinners", "--grid", "seed=1,2", "--json"]])
def test_output_to_a_full_disk_is_one_line_exit_2(command):
    """stdout on /dev/full (ENOSPC on every write), as `> out.json` on a full disk (was a traceback, exit 1)."""
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "throttlelab", *command], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "throttlelab: error: cannot write the output: No space left on device"
    assert all(line.startswith("sweep: ") for line in result.stderr.splitlines()[:-1]), result.stderr
