"""Fixtures shared by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import scenario_text


@pytest.fixture
def write_scenario(tmp_path: Path):
    """Write the test scenario (with changes) to a file; returns its path as a string."""

    def write(text: str | None = None, **changes: str) -> str:
        path = tmp_path / "scenario.toml"
        path.write_text(text if text is not None else scenario_text(**changes))
        return str(path)

    return write
