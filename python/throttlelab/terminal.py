"""The terminal every command writes to: results on stdout, progress on stderr,
compact tables, and the number formats the commands share."""

from __future__ import annotations

import difflib
import functools
import os
import re
import sys
import time
from typing import IO, TYPE_CHECKING, Any, Iterable, Optional

if TYPE_CHECKING:  # rich is imported where something is drawn: it was a quarter of the CLI's start (docs/engine.md)
    from rich.console import Console, RenderableType
    from rich.progress import Progress
    from rich.table import Table


def is_terminal(stream: IO[str]) -> bool:
    """Whether rich's Console writing to ``stream`` takes it for a terminal
    (``Console.is_terminal``). rich is asked unless its answer is certainly no:
    ``stream`` is no tty and neither ``TTY_COMPATIBLE=1`` nor ``FORCE_COLOR``
    (which rich reads before the tty) is set. So a pipe or a file costs no import of rich."""
    if os.environ.get("TTY_COMPATIBLE") != "1" and "FORCE_COLOR" not in os.environ:
        try:
            if not stream.isatty():
                return False
        except (AttributeError, ValueError):  # no isatty, or closed: rich says no too
            return False
    from rich.console import Console

    return Console(file=stream).is_terminal


class Terminal:
    """stdout's console for results and stderr's for progress and notes. Off a
    terminal (a pipe, a file) tables are not cut to 80 columns but keep their
    natural width, up to 120, progress is not drawn, and stderr gets plain
    lines, written without rich."""

    def __init__(self) -> None:
        self.out_is_terminal = is_terminal(sys.stdout)
        self.err_is_terminal = is_terminal(sys.stderr)

    @functools.cached_property
    def out(self) -> "Console":
        from rich.console import Console

        return Console() if self.out_is_terminal else Console(width=120)

    @functools.cached_property
    def err(self) -> "Console":
        from rich.console import Console

        return Console(stderr=True)

    def print(self, *renderables: "RenderableType") -> None:
        """Each renderable on lines of its own."""
        for renderable in renderables:
            self.out.print(renderable)

    def note(self, message: str) -> None:
        """A step of a long command (fetching, booting), as a line on stderr."""
        if self.err_is_terminal:
            self.err.print(f"throttlelab: {message}", style="dim", markup=False, highlight=False)
        else:
            err_line(f"throttlelab: {message}")

    def progress(self) -> "Progress | LineProgress":
        """Progress on stderr, so that stdout stays the result: a transient bar on
        a terminal; elsewhere (a pipe, a log) a line when the step changes and
        at every tenth of the work."""
        if not self.err_is_terminal:
            return LineProgress()
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        return Progress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(), console=self.err, transient=True,
        )


def err_line(text: str) -> None:
    """``text`` as one line on stderr, off a terminal: as it is, not wrapped at
    the console's width as rich wrapped it (docs/engine.md, "The command's start
    (rich15)")."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


class LineProgress:
    """The part of rich's Progress the commands use, as plain lines: ``what:
    done/total (elapsed)``. Nothing is printed before the first step, so an
    error at the start stays the only line."""

    def __init__(self) -> None:
        self.tasks: list[dict[str, Any]] = []
        self.start = time.monotonic()

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *_exc: object) -> None:
        pass

    def add_task(self, description: str, total: Optional[float] = None) -> int:
        self.tasks.append({"description": description, "total": total, "completed": 0, "shown": -1, "named": None})
        return len(self.tasks) - 1

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def update(
        self, task: int, advance: float = 0, description: Optional[str] = None, total: Optional[float] = None,
        completed: Optional[float] = None,
    ) -> None:
        t = self.tasks[task]
        t["completed"] = advance + (t["completed"] if completed is None else completed)
        t["description"] = description or t["description"]
        t["total"] = total if total is not None else t["total"]
        if not t["completed"]:
            return
        tenth = int(10 * t["completed"] / t["total"]) if t["total"] else t["completed"]
        if tenth != t["shown"] or t["description"] != t["named"]:
            t["shown"], t["named"] = tenth, t["description"]
            of = f"/{t['total']:g}" if t["total"] else ""
            err_line(f"{t['description']}: {t['completed']:g}{of} ({time.monotonic() - self.start:.0f} s)")


def table(title: str, columns: Iterable[str], left: Iterable[str] = ()) -> "Table":
    """A compact table, so that a report fits in 80 columns: ``columns`` right
    aligned (numbers) except those in ``left``."""
    from rich import box
    from rich.table import Table

    left = set(left)
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in columns:
        t.add_column(col, justify="left" if col in left else "right")
    return t


def seconds(usec: int) -> str:
    """Seconds to the millisecond, or to fewer places once that makes no difference."""
    s = usec / 1e6
    return f"{s:.3f}" if s < 100 else f"{s:.1f}" if s < 10_000 else f"{s:.0f}"


def millis(usec: Optional[float]) -> str:
    return "-" if usec is None else f"{usec / 1e3:.2f}"


def natural(name: str) -> list[Any]:
    """Sort key that puts task2 before task10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def did_you_mean(name: str, choices: Iterable[str], noun: str) -> str:
    """The close matches of ``name`` among ``choices``, or all of them, for an error message."""
    choices = list(choices)
    close = difflib.get_close_matches(name, choices, n=3)
    return f"did you mean {', '.join(close)}?" if close else f"{noun}: {', '.join(choices)}"
