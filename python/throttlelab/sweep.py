"""``throttlelab sweep``: one scenario over the cross product of parameter grids.

Every combination of grid values becomes one run (``--set`` overrides plus the
combination's ``key=value`` overrides); every run becomes one row: the grid values
under their keys, then the run's metrics flattened to ``cgroup.<name>.<metric>`` and
``task.<name>.<metric>``. The simulator is deterministic and rows hold no wall
time, so the same grid gives the same rows under every executor.

The runs go through :class:`throttlelab.runner.Runner` (``local``: a process pool
over the machine's cores; ``ray``: a local Ray instance or a cluster at ``address``).

:class:`CsvOut` keeps each row in the CSV file as its run finishes, so that an
interrupted sweep loses no finished run, and ``--resume`` runs only the rows
the file does not hold yet; a finished sweep's file is in grid order.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import itertools
import json
import os
import stat
import tomllib
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

from throttlelab import _native
from throttlelab.metrics import BY_KEY
from throttlelab.runner import Run, Runner, Step, held
from throttlelab.scenarios import PathArg
from throttlelab.terminal import millis, table

if TYPE_CHECKING:
    import pandas
    from rich.table import Table

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
    combos, runs = sweep_runs(text, grid, overrides)
    with Runner(executor, address, workers) as runner:
        docs = runner.run_many(runs, step)
    return [{**combo, **flatten(doc)} for combo, doc in zip(combos, docs)]


def sweep_runs(text: str, grid: Mapping[str, Sequence[Any]], overrides: Iterable[str] = ()) -> tuple[list[dict[str, Any]], list[Run]]:
    """The grid's combinations, in grid order, and the run of each."""
    combos = combinations(grid)
    overrides = list(overrides)
    return combos, [Run(text, [*overrides, *(f"{k}={_toml(v)}" for k, v in combo.items())]) for combo in combos]


def _line(fields: Sequence[Any]) -> str:
    """One CSV line, as ``csv.writer`` writes it."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(fields)
    return out.getvalue()


def _cells(fields: Sequence[Any]) -> tuple[str, ...]:
    """``fields`` as a CSV reader reads them back from their line."""
    return tuple(next(csv.reader([_line(fields)])))


class CsvOut:
    """``sweep -o FILE``: each row appended to ``path`` as its run finishes
    (flushed), the file rewritten in grid order at the end (a new file moved in
    place, so that the rows are never only in memory). With ``resume`` the rows
    already in the file are kept and not run again; the file must be this
    grid's (its grid columns, then, at the first new row, every column)."""

    def __init__(self, path: str, keys: list[str], combos: list[dict[str, Any]], resume: bool):
        self.path = path
        self.keys = keys
        self.total = len(combos)
        index = {_cells(list(combo.values())): i for i, combo in enumerate(combos)}
        self.header: Optional[list[str]] = None
        self.lines: dict[int, str] = {}  # grid index -> its CSV line
        self.had = 0
        text = ""
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        except OSError as e:
            raise SweepError(f"cannot write {path}: {e.strerror}") from None
        try:  # one sweep at a time writes a file: two would run each row twice, and interleave
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise SweepError(f"{path} is being written by another sweep") from None
        try:
            if resume:
                try:
                    with open(path, "rb") as f:
                        text = f.read().decode("utf-8")
                except (OSError, UnicodeDecodeError) as e:
                    raise SweepError(f"--resume: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
            self._read(text, index)
            self.had = len(self.lines)
            # Not --resume: the file starts anew. --resume: a line cut off by a
            # kill or a full disk goes (its run runs again).
            whole = len(text.encode("utf-8")) - len(text.rpartition("\n")[2].encode("utf-8"))
            if stat.S_ISREG(os.fstat(self.fd).st_mode) and os.fstat(self.fd).st_size != whole:
                os.ftruncate(self.fd, whole)
        except OSError as e:
            os.close(self.fd)
            raise SweepError(f"cannot write {path}: {e.strerror}") from None
        except SweepError:
            os.close(self.fd)
            raise

    def _read(self, text: str, index: dict[tuple[str, ...], int]) -> None:
        whole = text.rpartition("\n")[0] + "\n" if "\n" in text else ""
        for n, fields in enumerate(csv.reader(io.StringIO(whole)), 1):
            if self.header is None:
                self.header = fields
                if fields[: len(self.keys)] != self.keys:
                    raise SweepError(
                        f"--resume: {self.path} is not this sweep's file: its columns start "
                        f"{','.join(fields[: len(self.keys)])}, this grid's are {','.join(self.keys)}"
                    )
                continue
            if len(fields) != len(self.header):
                raise SweepError(f"--resume: {self.path} line {n}: {len(fields)} fields, the header has {len(self.header)}")
            i = index.get(tuple(fields[: len(self.keys)]))
            if i is None:
                raise SweepError(f"--resume: {self.path} line {n} is not a row of this grid ({','.join(fields[: len(self.keys)])})")
            if i in self.lines:
                raise SweepError(f"--resume: {self.path} line {n} repeats a row ({','.join(fields[: len(self.keys)])})")
            self.lines[i] = _line(fields)

    def add(self, i: int, row: Row) -> None:
        """Append grid row ``i`` and flush it."""
        line = ""
        if self.header is None:
            self.header = list(row)
            line = _line(self.header)
        elif list(row) != self.header:
            raise SweepError(f"--resume: {self.path} is not this sweep's file: its columns differ from this run's ({_first_difference(self.header, list(row))})")
        fields = _line([row[k] for k in self.header])
        with held():  # a signal waits: the row is in the file whole, and counted
            try:
                _write_all(self.fd, (line + fields).encode("utf-8"))
            except OSError as e:
                raise SweepError(f"cannot write {self.path}: {e.strerror} ({self.kept()}; --resume runs the rest)") from None
            self.lines[i] = fields

    def kept(self) -> str:
        """``5 of 12 rows kept (3 from before)``."""
        return f"{len(self.lines)} of {self.total} rows kept" + (f" ({self.had} from before)" if self.had else "")

    def finish(self) -> None:
        """Rewrite the file in grid order (if it is not already) and close it.
        The rows go to a new file moved over the old one: a full disk or a
        kill leaves the old one, every row in it."""
        os.close(self.fd)
        if list(self.lines) == sorted(self.lines) or self.header is None:
            return
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with held():
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
                try:
                    _write_all(fd, "".join([_line(self.header), *(self.lines[i] for i in sorted(self.lines))]).encode("utf-8"))
                finally:
                    os.close(fd)
                os.replace(tmp, self.path)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise SweepError(
                    f"cannot write {self.path} in grid order: {e.strerror} (all {len(self.lines)} rows are in it, in the order they finished)"
                ) from None


def _write_all(fd: int, data: bytes) -> None:
    """os.write until all of ``data`` is written (a write may take part of it)."""
    while data:
        data = data[os.write(fd, data):]


def _first_difference(ours: list[str], theirs: list[str]) -> str:
    for n, (a, b) in enumerate(zip(ours, theirs), 1):
        if a != b:
            return f"column {n} is {a}, this run's {b}"
    return f"{len(ours)} columns, this run's {len(theirs)}"


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
