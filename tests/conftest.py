"""Fixtures shared by the tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from helpers import scenario_text

# Property tests draw the same cases on every run unless HYPOTHESIS_PROFILE=explore
# (scripts/explore.sh), which draws many more, from a random seed.
settings.register_profile("ci", max_examples=50, derandomize=True, database=None)
settings.register_profile("explore", max_examples=2000, derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def write_scenario(tmp_path: Path):
    """Write the test scenario (with changes) to a file; returns its path as a string."""

    def write(text: str | None = None, **changes: str) -> str:
        path = tmp_path / "scenario.toml"
        path.write_text(text if text is not None else scenario_text(**changes))
        return str(path)

    return write
