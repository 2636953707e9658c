#!/usr/bin/env python3
"""`throttlelab accept` with this repository's defaults: the report goes to
docs/ (`--out`), and `--programs a,b` names the programs. The driver is
python/throttlelab/acceptance/ (docs/acceptance.md).

    python scripts/acceptance.py [--programs sysbench,stress-ng] [--runs 5] [--seeds 20]
    python scripts/acceptance.py --rejudge docs/acceptance.json
"""

import sys
from pathlib import Path

from throttlelab.cli import main

DOCS = Path(__file__).resolve().parent.parent / "docs"


def argv(args: list[str]) -> list[str]:
    """The command's arguments for the script's: `--programs a,b` (or
    `--programs=a,b`) as the programs themselves, `--out` docs/ unless given."""
    out, programs, i = [], [], 0
    while i < len(args):
        if args[i] == "--programs" and i + 1 < len(args):
            programs += args[i + 1].split(",")
            i += 2
            continue
        if args[i].startswith("--programs="):
            programs += args[i].split("=", 1)[1].split(",")
        else:
            out.append(args[i])
        i += 1
    if not any(a in ("-o", "--out") or a.startswith("--out=") for a in out):
        out += ["--out", str(DOCS)]
    return ["accept", *out, *programs]


if __name__ == "__main__":
    main(argv(sys.argv[1:]))
