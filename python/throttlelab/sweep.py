"""``throttlelab sweep``: one scenario over the cross product of parameter grids.

Every combination of grid values becomes one run (``--set`` overrides plus the
combination's ``key=value`` overrides); every run becomes one row: the grid values
under their keys, then the run's metrics flattened to ``cgroup.<name>.<metric>`` and
``task.<name>.<metric>``. The simulator is deterministic and rows hold no wall
time, so the same grid gives the same rows under every executor.

The runs go through :class:`throttlelab.runner.Runner` (``local``: a process pool
over the machine's cores; ``ray``: a local Ray instance or a cluster at ``address``).
"""

from __future__ import annotations

import itertools
import json
import tomllib
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

from rich.table import Table

from throttlelab import _native
from throttlelab.metrics import BY_KEY
from throttlelab.runner import Runner, Step
from throttlelab.scenarios import PathArg
from throttlelab.terminal import millis, table

if TYPE_CHECKING:
    import pandas

Row = dict[str, Any]


class SweepError(ValueError):
    """A malformed grid (a user error: exit code 2)."""


def parse_grid(spec: str) -> tuple[str, list[Any]]:
    """``key=v1,v2,...`` → ``(key, values)``, each value read as ``--set key=v``
    reads it (the core's rule: TOML syntax, text for a text key such as
    ``kernel.profile`` and for a bare word such as ``max``), so that the rows'
    columns are typed. Commas inside brackets or quotes do not split
    (``kernel.features=[],["slush_fund"]``)."""
    key, sep, rest = spec.partition("=")
    key = key.strip()
    values = _split_values(rest)
    if not sep or not key or any(c.isspace() for c in key) or not all(values):
        raise SweepError(f"--grid {spec!r}: expected KEY=V1,V2,... (e.g. cgroup.app.quota_us=50000,100000)")
    return key, [json.loads(_native.override_value(key, v)) for v in values]


def _split_values(text: str) -> list[str]:
    """``text`` split at its top-level commas: a value that opens a bracket, brace
    or quote runs on until it is a whole TOML value; parts stripped."""
    values: list[str] = []
    pending: Optional[str] = None
    for part in text.split(","):
        pending = part if pending is None else f"{pending},{part}"
        if not any(c in pending for c in "[{\"'") or _is_toml_value(pending):
            values.append(pending.strip())
            pending = None
    return values if pending is None else [*values, ""]  # an unclosed value: malformed


def _is_toml_value(text: str) -> bool:
    try:
        tomllib.loads(f"v = {text}")
    except tomllib.TOMLDecodeError:
        return False
    return True


def _toml(value: Any) -> str:
    """``value`` as the right-hand side of a ``--set`` override (text is passed as is)."""
    if isinstance(value, str):
        return value
    if hasattr(value, "item"):  # a numpy scalar, e.g. from numpy.arange
        value = value.item()
    return json.dumps(value)  # numbers, booleans and lists of strings read the same in TOML


def combinations(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The cross product of the grid, first key slowest, in the values' order."""
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not values:
            raise SweepError(f"grid key {key}: needs a non-empty list of values")
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*grid.values())]


def flatten(doc: dict[str, Any]) -> Row:
    """The metrics of one output document as flat columns (no engine block, no wall time)."""
    row: Row = {}
    for name, cg in doc["cgroups"].items():
        for metric, value in cg.items():
            if metric == "limit":  # cgroup.app.quota_us: the key a --grid sets it by
                for key, setting in value.items():
                    row[f"cgroup.{name}.{key}"] = setting
            else:
                row[f"cgroup.{name}.{metric}"] = value
    for name, task in doc["tasks"].items():
        for metric, value in task.items():
            if metric.endswith("latency_us"):  # latency_us, service_latency_us
                for q, us in value.items():
                    row[f"task.{name}.{metric.removesuffix('_us')}_{q}_us"] = us
            else:
                row[f"task.{name}.{metric}"] = value
    return row


def sweep_rows(
    text: str,
    grid: Mapping[str, Sequence[Any]],
    overrides: Iterable[str] = (),
    executor: str = "local",
    address: Optional[str] = None,
    workers: Optional[int] = None,
    step: Optional[Step] = None,
) -> list[Row]:
    """Run scenario ``text`` once per grid combination; one row each, in grid order.

    The runner validates every combination before any runs, so that a bad key or
    value fails at once with the core's one-line message."""
    with Runner(executor, address, workers) as runner:
        combos = combinations(grid)
        runs = [(text, [*overrides, *(f"{k}={_toml(v)}" for k, v in combo.items())]) for combo in combos]
        docs = runner.run_many(runs, step)
    return [{**combo, **flatten(doc)} for combo, doc in zip(combos, docs)]


def sweep(
    scenario: PathArg,
    grid: Mapping[str, Sequence[Any]],
    *,
    set: Optional[Iterable[str]] = None,
    executor: str = "local",
    address: Optional[str] = None,
    workers: Optional[int] = None,
) -> "pandas.DataFrame":
    """Run ``scenario`` (a built-in name, a path or TOML text) over the cross product
    of ``grid`` ({key: [values]}); one DataFrame row per run, in grid order."""
    import pandas  # only here: the CLI does not need it

    from throttlelab import scenario_text

    rows = sweep_rows(scenario_text(scenario), grid, set or (), executor, address, workers)
    return pandas.DataFrame(rows)


def render(keys: list[str], rows: list[Row]) -> Table:
    """The grid columns and, per cgroup, throttled % and throttled time; per service, p99."""
    metrics = []  # (column key, header, format)
    for col in rows[0]:
        name = col.split(".")[1] if "." in col else col
        if col.startswith("cgroup.") and col.rsplit(".", 1)[1] in ("throttled_ratio", "throttled_usec"):
            shown = BY_KEY[col.rsplit(".", 1)[1]]
            metrics.append((col, f"{name} {shown.header}", shown.show))
        elif col.startswith("task.") and col.endswith(".latency_p99_us"):
            metrics.append((col, f"{name} p99 ms", millis))
    # cgroup.app.quota_us -> app.quota_us
    headers = [key.split(".", 1)[1] if key.count(".") > 1 else key for key in keys]
    t = table(f"sweep: {len(rows)} runs", [*headers, *(header for _, header, _ in metrics)])
    for row in rows:
        t.add_row(*(str(row[k]) for k in keys), *(fmt(row[col]) for col, _, fmt in metrics))
    return t
