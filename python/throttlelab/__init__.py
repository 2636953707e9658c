"""throttlelab: simulate Linux CFS bandwidth control (cpu.max) throttling.

The simulator and the scenario parser live in the Rust core (``throttlelab._native``);
this package resolves scenarios, runs them and presents the results.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Optional

from throttlelab._native import ScenarioError, __version__
from throttlelab._native import run as _native_run
from throttlelab.scenarios import PathArg, ScenarioNotFound, builtin_names, load_scenario_text

# These functions take the names of their modules: import anything else from
# throttlelab.sweep, throttlelab.advise and throttlelab.explain with "from ... import".
from throttlelab.advise import advise
from throttlelab.explain import explain
from throttlelab.sweep import sweep

__all__ = [
    "ScenarioError",
    "ScenarioNotFound",
    "__version__",
    "advise",
    "builtin_names",
    "explain",
    "load_scenario_text",
    "run",
    "scenario_text",
    "sweep",
]


def scenario_text(scenario: PathArg) -> str:
    """TOML text of ``scenario``: a built-in name, a path, or TOML text itself
    (recognised by a line break, which no name or path contains)."""
    if isinstance(scenario, str) and "\n" in scenario:
        return scenario
    return load_scenario_text(scenario)[0]


def run(scenario: PathArg, *, set: Optional[Iterable[str]] = None) -> dict[str, Any]:
    """Simulate ``scenario`` (see :func:`scenario_text`) with ``key=value`` overrides,
    as given to ``--set``; returns the output document (schema in DESIGN.md)."""
    return json.loads(_native_run(scenario_text(scenario), list(set or ())))
