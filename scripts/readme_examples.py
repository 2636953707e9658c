"""Regenerate the outputs of the README's examples, or check that they are current.

An example is a fenced block whose first line is ``$ throttlelab ...``; the lines
after it are what the installed package prints (stdout; stderr when it fails, as
for an error example), trailing spaces cut. Tables are as printed off a terminal.

    python scripts/readme_examples.py          # rewrite README.md
    python scripts/readme_examples.py --check  # exit 1 and name each stale example
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
EXAMPLE = re.compile(r"```\n\$ (throttlelab [^\n]*)\n(.*?)```", re.S)
#: The engine's wall time ("engine: 2701 events in 0.001 s wall") differs from run to run.
WALL = re.compile(r"(?<=events in )\d+\.\d+(?= s wall)")


def output(command: str) -> str:
    """What ``command`` prints, as the README shows it (run by this Python's
    throttlelab, whatever is on PATH)."""
    argv = [sys.executable, "-m", *shlex.split(command)]
    done = subprocess.run(argv, capture_output=True, text=True)
    printed = done.stdout if done.returncode == 0 else done.stderr
    return "".join(line.rstrip() + "\n" for line in printed.rstrip().splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if an example is stale")
    args = parser.parse_args()
    text = README.read_text(encoding="utf-8")
    stale = []

    def regenerate(m: re.Match[str]) -> str:
        command, shown = m.group(1), m.group(2)
        now = output(command)
        if WALL.sub("", now) == WALL.sub("", shown):
            return m.group(0)
        stale.append(command)
        return f"```\n$ {command}\n{now}```"

    new = EXAMPLE.sub(regenerate, text)
    if args.check:
        for command in stale:
            print(f"README.md: the output of `{command}` is not what it prints today", file=sys.stderr)
        return 1 if stale else 0
    README.write_text(new, encoding="utf-8")
    print(f"{len(stale)} example(s) regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
