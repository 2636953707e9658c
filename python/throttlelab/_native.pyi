"""Type stub for the Rust extension (crates/throttlelab-py): conversion and errors only.

Every function takes a scenario as TOML text and overrides as ``dotted.key=value``
strings in TOML value syntax (``cgroup.app.quota_us=50000``, ``seed=3``), and
returns JSON text."""

import os
from typing import Any, Optional, Union

__version__: str

class ScenarioError(ValueError):
    """A scenario file or --set override is invalid (one line naming the key)."""

class HarnessError(Exception):
    """The real backend refused the run or the host failed it (one line)."""

class Interrupted(Exception):
    """SIGINT or SIGTERM ended a real run; its cgroups and workers are gone."""

class PanicException(BaseException):
    """A panic in the Rust code (a bug): pyo3's exception for it."""

def validate(scenario: str, overrides: list[str] = ...) -> str:
    """The resolved scenario as JSON, or ScenarioError."""

def run(scenario: str, overrides: list[str] = ...) -> str:
    """Simulate; the output document as JSON (deterministic for a seed, engine aside)."""

class Document:
    """A scenario's TOML text parsed once, for many runs with different overrides."""

    def __init__(self, text: str) -> None: ...
    def validate(self, overrides: list[str] = ..., stop: tuple[str, float] | None = None) -> str:
        """Like the module's ``validate``; with ``stop``, also that ``run`` can take it."""
    def run(
        self, overrides: list[str] = ..., like_host: str | None = None, placed: bool = False,
        stop: tuple[str, float] | None = None,
    ) -> str:
        """Like the module's ``run``; with ``like_host`` (a real run's ``host`` block as
        JSON), set up like that host, and ``placed``, started and with its period
        timers where that kernel run had them; with ``stop`` (``(cgroup,
        max_throttled)``), stopped once that cgroup's throttled_ratio is certain to
        end above ``max_throttled`` (the output then says ``stopped``)."""

#: The real backend's run lock file (crates/throttlelab-real/src/lock.rs).
LOCK_PATH: str

#: A tick later than this (ns) is late beyond the jitter (``TickLateness::LATE_NS``,
#: crates/throttlelab-core/src/vocab/output.rs): the probe's and ``diff``'s threshold.
TICK_LATE_NS: int

class RunLock:
    """The real backend's run lock, held until ``release`` (or until dropped):
    one run measuring the host at a time. Taking it raises ``HarnessError``
    naming the pid that holds it."""

    def __init__(self, path: Union[str, os.PathLike[str]] = ...) -> None: ...
    def release(self) -> None:
        """Let it go (a second release does nothing)."""

def rt_app_scenario(json: str, name: str) -> str:
    """The scenario (TOML text) for an rt-app workload (JSON text), named ``name``."""
def scenario_toml(comment: str, tables: dict[str, Any], notes: Optional[dict[str, str]] = None) -> str:
    """A scenario's TOML text, by the core's one writer (``ScenarioToml``): the
    comment line ``comment``, then each key of ``tables`` in order, put by its
    shape (a dict: a table ``[key]``; a non-empty list of dicts: ``[[key]]``;
    else a top-level key; dicts and lists inside a table stay inline), with
    ``notes`` (table name -> a comment line) above their tables."""
def read_phases(path: Union[str, os.PathLike[str]]) -> list[tuple[str, list[str]]]: ...
def write_phases(path: Union[str, os.PathLike[str]], sections: list[tuple[str, list[str]]]) -> None: ...
def write_replay(text: str, tasks: list[tuple[str, str, int]], sections: list[tuple[str, list[str]]], out: Union[str, os.PathLike[str]]) -> None: ...
def with_threads(capture: Union[str, os.PathLike[str]], workers: list[str], threads: int, out: Union[str, os.PathLike[str]]) -> None: ...

def override_value(key: str, raw: str) -> str:
    """How ``--set key=raw`` reads ``raw``, as JSON: a TOML value, or text (for a
    text key such as ``kernel.profile``, or a bare word such as ``max``)."""

class TraceRun:
    """A traced simulation in progress: iterate for ``(now_ns, chunk JSON)``, then ``output()``."""

    def __iter__(self) -> "TraceRun": ...
    def __next__(self) -> tuple[int, str]: ...
    def output(self) -> str: ...

def trace(scenario: str, overrides: list[str] = ..., from_ns: int = 0, to_ns: int = ...,
          like_host: str | None = None, placed: bool = False) -> TraceRun:
    """Simulate on a thread of its own, tracing ``[from_ns, to_ns]``; with ``like_host``
    (a real run's ``host`` JSON) set up like it, and ``placed`` where that run started."""

def real(scenario: str, overrides: list[str], worker: Union[str, os.PathLike[str]]) -> str:
    """Run on the host kernel in real cgroups (root), one ``worker`` executable
    (``throttlelab-worker``) per cgroup; the output document with ``host``."""

def rebase_paths(scenario: str, base_dir: Union[str, os.PathLike[str]]) -> str:
    """The text with relative ``trace_csv`` paths made absolute against ``base_dir``
    (comments and lines kept)."""

def profiles() -> list[str]:
    """Kernel profiles the simulator models, e.g. ``["4.18", ..., "6.18"]``."""

def features() -> list[str]:
    """Names accepted in ``kernel.features``."""

def profile_for_release(release: str) -> str:
    """The profile whose semantics kernel ``release`` has (``6.18.44-fc`` → ``6.18``); ValueError without a version."""

def profile_has_burst(profile: str) -> bool:
    """Whether ``profile`` has ``cpu.max.burst``; ValueError for an unknown profile."""

def capture(out: Union[str, os.PathLike[str]], duration_s: Optional[float] = ..., cgroup: Optional[Union[str, os.PathLike[str]]] = ...,
            pids: list[int] = ..., children: bool = ..., buffer_kb: Optional[int] = ..., strict: bool = ...) -> str:
    """Capture a cgroup's (or processes') threads from the kernel's scheduler
    events (root) for ``duration_s`` (None: until a signal); writes the scenario
    to ``out`` and its phases beside it, returns the ``[capture]`` table as JSON
    with ``signal``, the signal that ended it early (or None)."""

def probe_host(cpus: int) -> str:
    """Probe this host as the real backend does before a run (root; its lock
    held meanwhile), on its first ``cpus`` online CPUs: the ``host`` block as
    JSON (release, hz, background, work speed, tick lateness)."""

def measured_background_lengths(lengths_us: list[float]) -> list[float]:
    """``machine.background_lengths_us`` from measured lengths in any order (``compare``
    pools its runs' probes): the sample sorted, or at most 64 of its even quantiles."""
def like_host_overrides(host: str) -> list[str]:
    """The ``key=value`` overrides that set a scenario up like ``host`` (a
    ``host`` block as JSON), unpaired: the core's one rule, which ``compare``
    applies too."""

def real_preflight(scenario: str, overrides: list[str] = ...) -> None:
    """Raise HarnessError for what ``real`` would refuse before it starts (not root, more CPUs than the host, no cpu controller)."""
