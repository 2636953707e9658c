"""A phases file cannot take the machine's memory: more phases than a run may
hold (MAX_PHASES, summed over the run's files) is one line naming the file and
the section, exit 2, read only as far as the limit."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

#: scenario.rs's MAX_PHASES.
MAX_PHASES = 10_000_000


def _gzip_phases(path: Path, sections: dict[str, int]) -> None:
    """A phases file whose sections hold `n` phases each, `run_us 1` and `sleep_us 1` in turn."""
    gz = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = b"run_us 1\nsleep_us 1\n" * 500_000  # a million phases
    with open(path, "wb") as f:
        f.write(gz.compress(b"# throttlelab phases v1\n"))
        for name, n in sections.items():
            f.write(gz.compress(f"[{name}]\n".encode()))
            for _ in range(n // 1_000_000):
                f.write(gz.compress(chunk))
            f.write(gz.compress(chunk[: (n % 1_000_000) // 2 * 20] + (b"run_us 1\n" if n % 2 else b"")))
        f.write(gz.flush())


def _scenario(tmp_path: Path, files: dict[str, dict[str, int]]) -> Path:
    text = 'name = "big"\nduration_s = 1\n'
    for file, sections in files.items():
        _gzip_phases(tmp_path / file, sections)
        for name in sections:
            text += f'[[task]]\nname = "{name}"\nloop = 1\nphases_file = "{file}"\n'
    path = tmp_path / "big.toml"
    path.write_text(text)
    return path


def _throttlelab(*args: str) -> tuple[int, str, int]:
    """Exit code, stderr and peak RSS (MB) of the CLI in a process of its own."""
    proc = subprocess.Popen([sys.executable, "-m", "throttlelab", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, stderr, usage.ru_maxrss // 1024


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_file_of_more_phases_than_a_run_may_hold_is_one_line_exit_2(tmp_path, command):
    path = _scenario(tmp_path, {"w.phases.gz": {"a-1": MAX_PHASES + 1}})
    code, stderr, rss_mb = _throttlelab(command, str(path))
    assert code == 2, stderr
    assert stderr == (
        f"throttlelab: error: task.a-1.phases_file: {tmp_path / 'w.phases.gz'}: line {MAX_PHASES + 3}: section [a-1] "
        f"passes the {MAX_PHASES} phases a run may hold (24 bytes each); capture a shorter span (line 6)\n"
    )
    # Read as far as the limit only: 24 bytes a phase, and the vector's doubling.
    assert rss_mb < 500


def test_the_limit_is_the_runs_not_each_files(tmp_path):
    half = MAX_PHASES // 2
    path = _scenario(tmp_path, {"a.phases.gz": {"a-1": half}, "b.phases.gz": {"b-1": half - 1, "b-2": 2}})
    code, stderr, _ = _throttlelab("validate", str(path))
    assert code == 2
    assert f"b.phases.gz: line {half + 4}: section [b-2] passes the {MAX_PHASES} phases a run may hold (24 bytes each, with the {half} of the run's other phases files)" in stderr
    assert stderr.count("\n") == 1
