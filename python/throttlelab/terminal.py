"""The terminal every command writes to: results on stdout, progress on stderr,
compact tables, and the number formats the commands share."""

from __future__ import annotations

import difflib
import re
from typing import Any, Iterable, Optional

from rich import box
from rich.console import Console, RenderableType
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


class Terminal:
    """stdout's console for results and stderr's for progress. Off a terminal (a
    pipe, a file) tables are not cut to 80 columns but keep their natural
    width, up to 120, and progress is not drawn."""

    def __init__(self) -> None:
        out = Console()
        self.out = out if out.is_terminal else Console(width=120)
        self.err = Console(stderr=True)

    def print(self, *renderables: RenderableType) -> None:
        """Each renderable on lines of its own."""
        for renderable in renderables:
            self.out.print(renderable)

    def progress(self) -> Progress:
        """A transient progress bar on stderr, so that stdout stays the result; none
        when stderr is not a terminal (where the bar would leave an empty line
        before an error)."""
        return Progress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(), console=self.err, transient=True, disable=not self.err.is_terminal,
        )


def table(title: str, columns: Iterable[str], left: Iterable[str] = ()) -> Table:
    """A compact table, so that a report fits in 80 columns: ``columns`` right
    aligned (numbers) except those in ``left``."""
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
