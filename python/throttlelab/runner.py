"""Many simulations at once: the one runner behind ``sweep``, ``advise``,
``reproduce`` and ``compare``.

A run is a scenario's TOML text and its ``--set`` overrides (and, for
``compare``, the host to set the simulator up like); its result is the output
document. Each process parses a scenario's text once and keeps it
(:func:`document`) for every run of it. The simulator is deterministic, so the results are the same,
in the order of the runs, whichever executor ran them:

- ``local``: a process pool over this machine's cores (``workers`` processes),
  kept for the runner's life, so that a search that asks for runs round after
  round does not start a pool per round;
- ``ray``: a local Ray instance (``workers`` CPUs), or a cluster at ``address``
  (needs ``pip install '.[ray]'``).
"""

from __future__ import annotations

import functools
import json
import os
import socket
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from typing import Any, Callable, NamedTuple, Optional, Sequence

from throttlelab import _native

EXECUTORS = ("local", "ray")

class Run(NamedTuple):
    """One simulation; a plain ``(text, overrides)`` tuple is one too."""

    text: str
    overrides: Sequence[str] = ()
    #: A real run's ``host`` block as JSON: set the simulator up like that host.
    like_host: Optional[str] = None
    #: With ``like_host``: start, and put the period timers, where that kernel run had them.
    placed: bool = False


Output = dict[str, Any]
Step = Callable[[], None]


class RunnerError(ValueError):
    """An executor that cannot run here, or options that do not fit it (a user error: exit code 2)."""


@functools.lru_cache(maxsize=16)
def document(text: str) -> _native.Document:
    """Scenario ``text`` parsed, once per process."""
    return _native.Document(text)


def simulate(text: str, overrides: Sequence[str] = (), like_host: Optional[str] = None, placed: bool = False) -> Output:
    """One simulation's output document (runs inside a pool or Ray worker)."""
    return json.loads(document(text).run(list(overrides), like_host, placed))


class Runner:
    """Runs simulations on ``executor``; use it as a context manager, which
    shuts the local pool down (a Ray instance this process started stays up
    for later runners: ``ray.shutdown()`` ends it)."""

    def __init__(self, executor: str = "local", address: Optional[str] = None, workers: Optional[int] = None):
        if executor not in EXECUTORS:
            raise RunnerError(f"unknown executor {executor!r} (choose {' or '.join(EXECUTORS)})")
        if address and executor != "ray":
            raise RunnerError("--address needs --executor ray")
        if address and workers:
            raise RunnerError("--workers sizes a local pool or Ray instance, not the cluster at --address")
        self.executor = executor
        self.address = address
        self.workers = workers or os.cpu_count() or 1
        self._pool: Optional[Executor] = None

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def run_many(self, runs: Sequence[Run | tuple[str, Sequence[str]]], step: Optional[Step] = None) -> list[Output]:
        """The output document of every run, in the order of ``runs``; ``step()``
        after each one completes (in any order). Every run is validated here
        first, so that a bad key or value fails at once, in this process, with
        the core's one-line message (a worker's ScenarioError cannot be pickled)."""
        runs = [Run(*run) for run in runs]
        for run in runs:
            document(run.text).validate(list(run.overrides))
        return self.map(simulate, runs, step)

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], step: Optional[Step] = None) -> list[Any]:
        """``[fn(*args) for args in calls]`` on the executor; ``fn`` must be a
        module-level function (pickled by name)."""
        step = step or (lambda: None)
        if not calls:
            return []
        if self.executor == "ray":
            return self._ray_map(fn, calls, step)
        if len(calls) == 1 or self.workers == 1:  # a pool would only add its start-up
            results = []
            for args in calls:
                results.append(fn(*args))
                step()
            return results
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers)
        results: list[Any] = [None] * len(calls)
        futures = {self._pool.submit(fn, *args): i for i, args in enumerate(calls)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            step()
        return results

    def _ray_map(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], step: Step) -> list[Any]:
        try:
            import ray
        except ImportError:
            raise RunnerError("the ray executor needs Ray: pip install '.[ray]'") from None
        if not ray.is_initialized():
            if self.address:
                _check_reachable(self.address)
            try:
                if self.address:
                    ray.init(address=self.address, log_to_driver=False, logging_level="ERROR")
                else:
                    ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            except (ConnectionError, ValueError, RuntimeError) as e:
                where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
                raise RunnerError(f"cannot start or reach {where}: {_first_line(e)}") from None
        remote = ray.remote(fn)
        refs = [remote.remote(*args) for args in calls]
        pending = list(refs)
        while pending:
            _, pending = ray.wait(pending, num_returns=1)
            step()
        return ray.get(refs)


def _first_line(e: BaseException) -> str:
    """The first line of an exception's message (Ray's run to many)."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


#: Seconds to wait for a Ray cluster's port before saying it is not there
#: (ray.init itself retries for minutes).
CONNECT_TIMEOUT_S = 5.0


def _check_reachable(address: str) -> None:
    """Refuse at once a ``host:port`` (or ``ray://host:port``) that nothing listens on."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and the like: Ray's own rules
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise RunnerError(f"cannot reach the Ray cluster at {address}: {e.strerror or e}") from None
