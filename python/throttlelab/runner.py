"""Many simulations at once: the one runner behind ``sweep``, ``advise``,
``reproduce`` and ``compare``.

A run is a scenario's TOML text and its ``--set`` overrides (and, for
``compare``, the host to set the simulator up like); its result is the output
document. Each process parses a scenario's text once and keeps it
(:func:`document`) for every run of it. The simulator is deterministic, so the results are the same,
in the order of the runs, whichever executor ran them:

- ``local``: a process pool over this machine's cores (``workers`` processes),
  kept for the runner's life, so that a search that asks for runs round after
  round does not start a pool per round (processes, not threads: within a few per cent at 2
  workers, measured in docs/engine.md, and a run whose worker is killed can run again);
- ``ray``: a local Ray instance (``workers`` CPUs), or a cluster at ``address``
  (needs ``pip install '.[ray]'``).

A run whose worker dies (SIGKILL from the OOM killer, say) is run again on a
fresh worker, at most :data:`RETRIES` times, on either executor; the runs the
other workers finished are kept. After that the run fails with
:class:`RunFailed`, which names it and the cause. :meth:`Runner.completed`
hands each result over as it finishes, so that a caller can keep it at once.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import multiprocessing
import os
import signal
import socket
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterator, NamedTuple, Optional, Sequence

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
    #: ``(cgroup, max_throttled)``: stop once that cgroup's throttled_ratio is
    #: certain to end above ``max_throttled``. The output then says ``stopped``
    #: and only tells that the target missed: never show or keep it as a result.
    stop: Optional[tuple[str, float]] = None


Output = dict[str, Any]
Step = Callable[[], None]


#: Times a run whose worker died is run again, on a fresh worker, before it fails.
RETRIES = 2


class RunnerError(ValueError):
    """An executor that cannot run here, or options that do not fit it (a user error: exit code 2)."""


class RunFailed(RuntimeError):
    """A run whose worker died on every one of its ``1 + RETRIES`` attempts;
    ``signal`` is the signal that killed it last (None: it exited, or Ray did
    not say)."""

    def __init__(self, message: str, signal: Optional[int] = None):
        super().__init__(message)
        self.signal = signal


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived inside :func:`interruptible`."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signal = signum


class _Held:
    """Signals that arrived inside :func:`held`, to raise when it ends."""

    depth = 0
    pending: Optional[int] = None


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` in the main thread
    while inside (the runner's ``__exit__`` then kills its workers), so that a
    command can keep what it finished and say so."""
    def interrupt(signum: int, _frame: object) -> None:
        if _Held.depth:
            _Held.pending = signum
        else:
            raise Interrupted(signum)

    caught = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {signum: signal.signal(signum, interrupt) for signum in caught}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        _Held.pending = None


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Inside :func:`interruptible`, a signal waits until this block is done
    (a row is written whole), then raises (a Python handler runs in the main
    thread, whichever thread the signal came to: blocking it there is not enough)."""
    _Held.depth += 1
    try:
        yield
    finally:
        _Held.depth -= 1
    if not _Held.depth and _Held.pending is not None:
        signum, _Held.pending = _Held.pending, None
        raise Interrupted(signum)


def _name(i: int, n: int, label: Optional[str]) -> str:
    """``run 3 of 30 (seed=2)``: a run as an error names it."""
    return f"run {i + 1} of {n}" + (f" ({label})" if label else "")


def _death(exitcode: Optional[int]) -> str:
    if exitcode is not None and exitcode < 0:
        return f"killed by signal {-exitcode} ({signal.Signals(-exitcode).name})"
    return f"exited with status {exitcode}"


@functools.lru_cache(maxsize=16)
def document(text: str) -> _native.Document:
    """Scenario ``text`` parsed, once per process."""
    return _native.Document(text)


def simulate(
    text: str, overrides: Sequence[str] = (), like_host: Optional[str] = None, placed: bool = False,
    stop: Optional[tuple[str, float]] = None,
) -> Output:
    """One simulation's output document (runs inside a pool or Ray worker)."""
    return json.loads(document(text).run(list(overrides), like_host, placed, stop))


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
        self._pool: Optional[_Pool] = None

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def run_many(self, runs: Sequence[Run | tuple[str, Sequence[str]]], step: Optional[Step] = None) -> list[Output]:
        """The output document of every run, in the order of ``runs``; ``step()``
        after each one completes (in any order). Every run is validated here
        first, so that a bad key or value fails at once, in this process, with
        the core's one-line message (a worker's ScenarioError cannot be pickled)."""
        return _in_order(self.completed_runs(runs), len(runs), step)

    def completed_runs(self, runs: Sequence[Run | tuple[str, Sequence[str]]]) -> Iterator[tuple[int, Output]]:
        """``(i, output document of runs[i])`` as each run finishes; validated
        first, as :meth:`run_many` says."""
        runs = [Run(*run) for run in runs]
        for run in runs:
            document(run.text).validate(list(run.overrides), run.stop)
        return self.completed(simulate, runs, labels=[" ".join(run.overrides) for run in runs])

    def map(
        self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], step: Optional[Step] = None,
        labels: Optional[Sequence[str]] = None,
    ) -> list[Any]:
        """``[fn(*args) for args in calls]`` on the executor; ``fn`` must be a
        module-level function (pickled by name); ``labels[i]`` names call ``i``
        in a :class:`RunFailed`."""
        return _in_order(self.completed(fn, calls, labels), len(calls), step)

    def completed(
        self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], labels: Optional[Sequence[str]] = None,
    ) -> Iterator[tuple[int, Any]]:
        """``(i, fn(*calls[i]))`` for every call, as each finishes (in any order)."""
        if not calls:
            return iter(())
        if self.executor == "ray":
            return self._ray_completed(fn, calls, labels)
        if len(calls) == 1 or self.workers == 1:  # a pool would only add its start-up
            return ((i, fn(*args)) for i, args in enumerate(calls))
        if self._pool is None:
            self._pool = _Pool(self.workers)
        return self._pool.completed(fn, calls, labels)

    def _ray_completed(
        self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], labels: Optional[Sequence[str]],
    ) -> Iterator[tuple[int, Any]]:
        try:
            import ray
        except ImportError:
            raise RunnerError("the ray executor needs Ray: pip install '.[ray]'") from None
        if not ray.is_initialized():
            if self.address:
                _check_reachable(self.address)
            # The local instance's processes start with Ctrl-C and a closed terminal
            # ignored (inherited through exec): a terminal sends those to the whole
            # process group, and a raylet killed under the driver crashed it (exit 1,
            # a C++ stack trace, Ray's processes left). This process handles them
            # and shuts Ray down.
            before = {signum: signal.signal(signum, signal.SIG_IGN) for signum in (signal.SIGINT, signal.SIGHUP)}
            try:
                if self.address:
                    ray.init(address=self.address, log_to_driver=False, logging_level="ERROR")
                else:
                    # "local": a new instance of its own, even where `ray start` left a
                    # cluster's address in /tmp/ray (ray.init would join that one, or
                    # refuse num_cpus for it: a shared host).
                    ray.init(address="local", num_cpus=self.workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            except (ConnectionError, ValueError, RuntimeError) as e:
                where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
                raise RunnerError(f"cannot start or reach {where}: {_first_line(e)}") from None
            finally:
                for signum, handler in before.items():
                    signal.signal(signum, handler)
        remote = ray.remote(max_retries=RETRIES)(fn)  # a task whose worker died runs again, as on the local pool
        refs = {remote.remote(*args): i for i, args in enumerate(calls)}
        # Interrupted, the tasks still pending are left to ray.shutdown (at exit):
        # ray.cancel(force=True) of a task that was just finishing crashed the
        # driver (Ray 2.x: "Tried to complete task that was not pending").
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            i = refs[ready[0]]
            try:
                result = ray.get(ready[0])
            except ray.exceptions.WorkerCrashedError:
                raise RunFailed(
                    f"{_name(i, len(calls), labels[i] if labels else None)} failed: "
                    f"its Ray worker died, {1 + RETRIES} times"
                ) from None
            yield i, result


def _serve(conn: Connection) -> None:
    """A pool worker: ``(i, fn, args)`` in, ``(i, ok, result or exception)`` out,
    until ``None`` or the runner's end of the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle: it ends the workers
    for signum in (signal.SIGTERM, signal.SIGHUP):  # not the runner's handlers, forked with it: these end a worker
        signal.signal(signum, signal.SIG_DFL)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        i, fn, args = task
        try:
            reply = (i, True, fn(*args))
        except BaseException as e:  # the runner raises it again
            reply = (i, False, e)
        try:
            conn.send(reply)
        except Exception as e:  # an exception that cannot be pickled: its text
            conn.send((i, False, RuntimeError(f"{type(reply[2]).__name__}: {reply[2]} ({e})")))


class _Worker(NamedTuple):
    process: multiprocessing.process.BaseProcess
    conn: Connection


class _Pool:
    """``size`` worker processes, each fed one run at a time over its own pipe,
    so that the runner knows which run a worker that died was running (a
    ProcessPoolExecutor cannot say, and breaks whole)."""

    def __init__(self, size: int):
        self.size = size
        self.idle: list[_Worker] = []
        self.busy: dict[_Worker, int] = {}

    def _start(self) -> _Worker:
        ctx = multiprocessing.get_context()
        ours, theirs = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(theirs,), daemon=True, name="throttlelab-runner")
        process.start()
        theirs.close()
        return _Worker(process, ours)

    def _end(self, worker: _Worker) -> Optional[int]:
        """Reap a worker that died; its exit code."""
        worker.conn.close()
        worker.process.join()
        return worker.process.exitcode

    def completed(
        self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], labels: Optional[Sequence[str]],
    ) -> Iterator[tuple[int, Any]]:
        todo = collections.deque(range(len(calls)))
        deaths: collections.Counter[int] = collections.Counter()
        try:
            while todo or self.busy:
                while todo and len(self.busy) < self.size:
                    i = todo.popleft()
                    worker = self.idle.pop() if self.idle else self._start()
                    try:
                        worker.conn.send((i, fn, calls[i]))
                    except (BrokenPipeError, ConnectionResetError):  # it died idle: not this run's doing
                        self._end(worker)
                        todo.appendleft(i)
                        continue
                    self.busy[worker] = i
                ready = set(wait([w.conn for w in self.busy] + [w.process.sentinel for w in self.busy]))
                for worker, i in list(self.busy.items()):
                    if worker.conn not in ready and worker.process.sentinel not in ready:
                        continue
                    del self.busy[worker]
                    try:
                        _, ok, result = worker.conn.recv()
                    except (EOFError, OSError):  # it died running call i
                        exitcode = self._end(worker)
                        deaths[i] += 1
                        if deaths[i] > RETRIES:
                            raise RunFailed(
                                f"{_name(i, len(calls), labels[i] if labels else None)} failed: its worker was "
                                f"{_death(exitcode)}, {deaths[i]} times",
                                -exitcode if exitcode is not None and exitcode < 0 else None,
                            ) from None
                        todo.appendleft(i)
                        continue
                    if worker.process.sentinel in ready:  # it answered, then died: not this run's doing
                        self._end(worker)
                    else:
                        self.idle.append(worker)
                    if not ok:
                        raise result
                    yield i, result
        finally:
            # Interrupted, a run failed or the caller stopped: the runs still going are not wanted.
            for worker in list(self.busy):
                worker.process.kill()
                self._end(worker)
            self.busy.clear()

    def close(self) -> None:
        for worker in list(self.busy):  # runs an interrupted caller left going
            worker.process.kill()
            self._end(worker)
        self.busy.clear()
        for worker in self.idle:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
        for worker in self.idle:
            worker.process.join(timeout=5)
            if worker.process.exitcode is None:
                worker.process.kill()
            self._end(worker)
        self.idle.clear()


def _in_order(completed: Iterator[tuple[int, Any]], n: int, step: Optional[Step]) -> list[Any]:
    """The ``n`` results of ``completed`` in call order; ``step()`` after each."""
    results: list[Any] = [None] * n
    for i, result in completed:
        results[i] = result
        if step:
            step()
    return results


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
