"""The README's example commands print what the README shows
(scripts/readme_examples.py regenerates them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "readme_examples.py"


def test_readme_examples_are_what_the_commands_print():
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
