"""The command's start: `rich` is imported only where something is drawn on a
terminal or a table printed (its import was about a quarter of the CLI's), and
off a terminal stderr gets plain lines, whole (docs/engine.md, "The command's
start (rich15)")."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from throttlelab.terminal import Terminal, is_terminal

#: Prints the rich modules loaded, last on stderr, as the process exits.
RICH_AT_EXIT = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write("
    "'rich modules: %s\\n' % sorted(m for m in sys.modules if m.split('.')[0] == 'rich')))\n"
)


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)


def test_importing_the_cli_imports_no_rich():
    done = _python(RICH_AT_EXIT + "import throttlelab.cli")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "rich modules: []", done.stderr


def test_advise_json_off_a_terminal_imports_no_rich():
    done = _python(
        RICH_AT_EXIT + "from throttlelab.cli import main; main(sys.argv[1:], prog_name='throttlelab')",
        "advise", "request-service", "--cgroup", "app", "--max-throttled", "5%", "--runs", "1", "--json",
    )
    assert done.returncode == 0, done.stderr
    assert "recommendation" in json.loads(done.stdout)
    *progress, last = done.stderr.splitlines()
    assert last == "rich modules: []", done.stderr
    assert progress and all(line.startswith("advise: ") for line in progress), done.stderr


def test_a_table_still_imports_rich():
    done = _python(RICH_AT_EXIT + "from throttlelab.cli import main; main(sys.argv[1:], prog_name='throttlelab')",
                   "run", "two-spinners", "--set", "duration_s=1")
    assert done.returncode == 0, done.stderr
    assert "'rich.console'" in done.stderr.splitlines()[-1] and "cgroups" in done.stdout


def test_a_note_off_a_terminal_is_one_line_as_written(capsys):
    """rich wrapped a plain line at the console's width (80 on a pipe), replaced
    :smile: by an emoji and expanded tabs; the line is now written as it is."""
    message = "wrote " + "/tmp/a-rather-long-directory-name/" * 3 + "trace.json :smile:\tdone"
    Terminal().note(message)
    assert capsys.readouterr().err == f"throttlelab: {message}\n"


@pytest.mark.parametrize("tty_compatible", [None, "0", "1", ""])
@pytest.mark.parametrize("force_color", [None, "", "1"])
@pytest.mark.parametrize("tty", [False, True])
def test_is_terminal_answers_as_rich_does(monkeypatch, tty, force_color, tty_compatible):
    from rich.console import Console

    for name, value in (("FORCE_COLOR", force_color), ("TTY_COMPATIBLE", tty_compatible)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    if tty:
        leader, follower = os.openpty()
        os.close(leader)
        stream = os.fdopen(follower, "w")
    else:
        stream = io.StringIO()
    with stream:
        assert is_terminal(stream) == Console(file=stream).is_terminal
