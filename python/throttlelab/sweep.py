"""``throttlelab sweep``: one scenario over the cross product of parameter grids.

Every combination of grid values becomes one run (``--set`` overrides plus the
combination's ``key=value`` overrides); every run becomes one row: the grid values
under their keys, then the run's metrics flattened to ``cgroup.<name>.<metric>`` and
``task.<name>.<metric>``. The simulator is deterministic and rows hold no wall
time, so the same grid gives the same rows under every executor.

Executors: ``local`` (a process pool over the machine's cores) and ``ray`` (a local
Ray instance, or a cluster at ``address``; needs ``pip install '.[ray]'``).
"""

from __future__ import annotations

import itertools
import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence, TypeVar

from throttlelab import _native
from throttlelab.scenarios import PathArg

if TYPE_CHECKING:
    import pandas

EXECUTORS = ("local", "ray")

T = TypeVar("T")
R = TypeVar("R")
Row = dict[str, Any]
Step = Callable[[], None]


class SweepError(ValueError):
    """A malformed grid, or an executor that cannot run here (a user error: exit code 2)."""


def parse_grid(spec: str) -> tuple[str, list[Any]]:
    """``key=v1,v2,...`` (values in TOML syntax, as for ``--set``) → ``(key, values)``.

    Commas inside brackets or quotes do not split (``kernel.features=[],["slush_fund"]``);
    numbers and booleans become Python values, so that the rows' columns are typed."""
    key, sep, rest = spec.partition("=")
    key = key.strip()
    values = _split_top_level(rest)
    if not sep or not key or any(c.isspace() for c in key) or not all(values):
        raise SweepError(f"--grid {spec!r}: expected KEY=V1,V2,... (e.g. cgroup.app.quota_us=50000,100000)")
    return key, [_typed(v) for v in values]


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside brackets, braces and quotes; parts stripped."""
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _typed(text: str) -> Any:
    """A TOML integer, float or boolean as a Python value; anything else stays text."""
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


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
            row[f"cgroup.{name}.{metric}"] = value
    for name, task in doc["tasks"].items():
        for metric, value in task.items():
            if metric == "latency_us":
                for q, us in value.items():
                    row[f"task.{name}.latency_{q}_us"] = us
            else:
                row[f"task.{name}.{metric}"] = value
    return row


def run_row(text: str, overrides: list[str]) -> Row:
    """Simulate one combination and flatten it (runs inside a pool worker)."""
    return flatten(json.loads(_native.run(text, overrides)))


def local_map(fn: Callable[..., R], calls: Sequence[tuple[Any, ...]], workers: Optional[int], step: Step) -> list[R]:
    """``[fn(*args) for args in calls]`` on a process pool of ``workers`` (default: every
    core); results in the order of ``calls``, ``step()`` after each one completes."""
    results: list[Any] = [None] * len(calls)
    with ProcessPoolExecutor(max_workers=min(workers or os.cpu_count() or 1, len(calls))) as pool:
        futures = {pool.submit(fn, *args): i for i, args in enumerate(calls)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            step()
    return results


def _ray_map(calls: Sequence[tuple[Any, ...]], address: Optional[str], workers: Optional[int], step: Step) -> list[Row]:
    """``run_row`` over Ray: an existing cluster at ``address``, or a local instance
    with ``workers`` CPUs (default: every core). An instance this process already
    started is reused, and stays up for later calls (``ray.shutdown()`` ends it)."""
    try:
        import ray
    except ImportError:
        raise SweepError("the ray executor needs Ray: pip install '.[ray]'") from None
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        else:
            ray.init(num_cpus=workers or os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    remote = ray.remote(run_row)
    refs = [remote.remote(*args) for args in calls]
    pending = list(refs)
    while pending:
        _, pending = ray.wait(pending, num_returns=1)
        step()
    return ray.get(refs)


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

    Every combination is validated before any runs, so that a bad key or value fails
    at once, in this process, with the core's one-line message."""
    if executor not in EXECUTORS:
        raise SweepError(f"unknown executor {executor!r} (choose {' or '.join(EXECUTORS)})")
    if address and executor != "ray":
        raise SweepError("--address needs --executor ray")
    if address and workers:
        raise SweepError("--workers sizes a local pool or Ray instance, not the cluster at --address")
    combos = combinations(grid)
    calls = [(text, [*overrides, *(f"{k}={_toml(v)}" for k, v in combo.items())]) for combo in combos]
    for _, run_overrides in calls:
        _native.validate(text, run_overrides)
    step = step or (lambda: None)
    if executor == "ray":
        metrics = _ray_map(calls, address, workers, step)
    else:
        metrics = local_map(run_row, calls, workers, step)
    return [{**combo, **m} for combo, m in zip(combos, metrics)]


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
