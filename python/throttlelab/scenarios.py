"""Resolution of scenario arguments: a built-in name (a ``scenarios/*.toml`` file
shipped in the package), a path to a TOML file, or a path to an rt-app workload
(``*.json``), which the core turns into a scenario."""

from __future__ import annotations

import os
from importlib.resources import files
from typing import Union

from throttlelab._native import rebase_paths, rt_app_scenario
from throttlelab.terminal import did_you_mean

PathArg = Union[str, os.PathLike]


class ScenarioNotFound(LookupError):
    """The argument names neither a built-in scenario nor a readable file."""


def _builtin_dir():
    return files("throttlelab") / "scenarios"


def builtin_names() -> list[str]:
    """Names of the built-in scenarios (file names without ``.toml``), sorted."""
    return sorted(
        entry.name[: -len(".toml")]
        for entry in _builtin_dir().iterdir()
        if entry.name.endswith(".toml")
    )


def description(text: str) -> str:
    """The one-line description a scenario file opens with (``# <description>``)."""
    first = text.split("\n", 1)[0].strip()
    return first.lstrip("#").strip() if first.startswith("#") else ""


def _looks_like_path(arg: str) -> bool:
    return os.sep in arg or "/" in arg or arg.endswith((".toml", ".json"))


def load_scenario_text(name_or_path: PathArg) -> tuple[str, str]:
    """Return ``(toml_text, origin)`` for a built-in name or a file path; an
    rt-app workload (``.json``) as the scenario the core makes of it.

    A file's relative ``trace_csv`` paths are made absolute against its directory,
    so that the text runs the same from anywhere (a sweep's pool, a Ray worker).

    A built-in name wins over a file of the same name in the working directory only
    when the argument does not look like a path (no separator, no ``.toml`` or ``.json``), so
    ``./x.toml`` always means the file. Raises ScenarioNotFound with close matches
    for an unknown built-in name, or the reason a file cannot be read.
    """
    arg = os.fspath(name_or_path)
    if not _looks_like_path(arg) and arg in builtin_names():
        return (_builtin_dir() / f"{arg}.toml").read_text(encoding="utf-8"), f"built-in:{arg}"
    try:
        with open(arg, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        if _looks_like_path(arg):
            raise ScenarioNotFound(f"no such scenario file: {arg}") from None
        raise ScenarioNotFound(_unknown_builtin_message(arg)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioNotFound(f"cannot read scenario file {arg}: {e}") from None
    if arg.endswith(".json"):
        name = os.path.splitext(os.path.basename(arg))[0]
        return rt_app_scenario(text, name), arg
    return rebase_paths(text, os.path.dirname(os.path.abspath(arg))), arg


def _unknown_builtin_message(name: str) -> str:
    return f"unknown scenario '{name}' (neither a built-in nor a file); {did_you_mean(name, builtin_names(), 'built-ins')}"
