"""Regenerate the outputs of the examples in the README and the user guide in
docs/, or check that they are current.

An example is a fenced block whose first line is ``$ throttlelab ...``; the lines
after it are what the installed package prints (stdout; stderr when it fails, as
for an error example), trailing spaces cut. Tables are as printed off a terminal.

    python scripts/readme_examples.py          # rewrite the files' stale examples
    python scripts/readme_examples.py --check  # exit 1 and name each stale example

Commands run from the repository's root (an example may name a file in it).
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The files whose examples are generated.
FILES = ("README.md", "docs/guide.md")
EXAMPLE = re.compile(r"```\n\$ (throttlelab [^\n]*)\n(.*?)```", re.S)
#: The engine's wall time ("engine: 2701 events in 0.001 s wall") differs from run to run.
WALL = re.compile(r"(?<=events in )\d+\.\d+(?= s wall)")


def output(command: str) -> str:
    """What ``command`` prints, as the examples show it (run by this Python's
    throttlelab, whatever is on PATH)."""
    argv = [sys.executable, "-m", *shlex.split(command)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    printed = done.stdout if done.returncode == 0 else done.stderr
    return "".join(line.rstrip() + "\n" for line in printed.rstrip().splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if an example is stale")
    args = parser.parse_args()
    stale = []
    for name in FILES:
        path = ROOT / name
        text = path.read_text(encoding="utf-8")

        def regenerate(m: re.Match[str]) -> str:
            command, shown = m.group(1), m.group(2)
            now = output(command)
            if WALL.sub("", now) == WALL.sub("", shown):
                return m.group(0)
            stale.append((name, command))
            return f"```\n$ {command}\n{now}```"

        new = EXAMPLE.sub(regenerate, text)
        if not args.check and new != text:
            path.write_text(new, encoding="utf-8")
    if args.check:
        for name, command in stale:
            print(f"{name}: the output of `{command}` is not what it prints today", file=sys.stderr)
        return 1 if stale else 0
    print(f"{len(stale)} example(s) regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
