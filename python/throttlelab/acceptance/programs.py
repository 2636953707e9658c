"""The programs an acceptance run measures, and what a capture of one becomes.

A `Program` runs a real program in a cgroup it is given (`run`), reads its
own figures (throughput, every request's latency), and says which of a
replay's tasks answer its requests (`predicted`) and how a capture of it
looks with another thread count (`with_threads`). Built in: sysbench,
stress-ng and the web servers' common part (here), Apache and nginx
(`apache`, `nginx`) and PostgreSQL under pgbench (`pgbench`); a user's own
is a Python file defining ``PROGRAM``, a class written to this interface
(`driver.load_program`).
"""

from __future__ import annotations

import random
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from throttlelab import _native
from throttlelab.acceptance.cgroup import spawn, stop
from throttlelab.metrics import percentile


# The program starts this long before a measured window, so that the window
# (and the capture) sees its steady state, and the window ends this long before
# the program does.
LEAD_S = 1.0
TAIL_S = 0.5

# The seed of every open-loop program's arrivals (h2load's schedules,
# sysbench's --rand-seed, pgbench's --random-seed): each run, the capture's
# too, draws the same schedule from its start, so that the kernel's runs
# differ from the capture and from each other in the limit and the timer
# phases only, as the simulator's seeds do, not in a draw of the traffic.
TRAFFIC_SEED = 1


@dataclass(frozen=True)
class Config:
    """A limit and a thread count: one row of the table. `demand_x`: the
    quota as a multiple of the program's demand (None: an absolute limit)."""

    name: str
    period_us: int
    quota_us: int
    burst_us: int
    threads: Optional[int]
    demand_x: Optional[float] = None

    def label(self) -> str:
        burst = f" burst {self.burst_us // 1000} ms" if self.burst_us else ""
        times = f" ({self.demand_x:g}x demand)" if self.demand_x else ""
        threads = f", {self.threads} threads" if self.threads else ""
        return f"{self.quota_us // 1000}/{self.period_us // 1000} ms{times}{burst}{threads}"


@dataclass(frozen=True)
class Limit:
    """A limit relative to the program's demand on this host: a quota of
    `demand_x` times the CPUs it uses unlimited in each `period_us`, and a
    burst of `burst_x` times that quota. Relative, so that a host that runs
    the program at another cost per request (pgbench took 26-42 us a query
    on one of our hosts, 90-117 on another) tests the same regime, away from
    a quota equal to the demand, where a per cent of demand decides the
    throttling (docs/acceptance.md, "The configurations")."""

    period_us: int
    demand_x: float
    burst_x: float = 0.0

    def config(self, name: str, demand_cpus: float, threads: Optional[int]) -> Config:
        """The limit in whole milliseconds of quota (at least the kernel's 1 ms)."""
        quota_us = max(1000, round(self.demand_x * demand_cpus * self.period_us / 1000) * 1000)
        return Config(name, self.period_us, quota_us, round(self.burst_x * quota_us), threads, self.demand_x)



def servers(requests: dict[str, int]) -> list[str]:
    """Of a server's captured tasks and how often each was woken for a
    request, those that serve the requests: woken at least a tenth as often
    as the busiest (its other processes are woken from outside only now and
    then: a connection, a signal; or by timers)."""
    busiest = max(requests.values(), default=0)
    return [name for name, n in requests.items() if n > 0 and n >= busiest / 10]


def request_percentiles(tasks: list[dict], quantiles: tuple[int, ...], latency: str = "from_arrival") -> dict[str, float]:
    """Each of `quantiles` (50, ...) of all the requests of the replay's
    `tasks` pooled, as a client of them all measures them: by `latency`
    (`from_arrival`, each request's, or `from_start`, from when a thread took
    it up) of their `latencies_us` (the replay keeps them: `predict`). A mean
    of the tasks' own percentiles would not do: a server process with 25
    requests in a window has its slowest as its p99. With the requests
    themselves under `latencies_ms`, as a kernel run's `Program.run` gives
    them, to pool over seeds. Nothing without requests."""
    latencies_ms = sorted(us / 1e3 for t in tasks for us in t["latencies_us"][latency])
    if not latencies_ms:
        return {}
    return {**{f"p{q}_ms": percentile(latencies_ms, q) for q in quantiles}, "latencies_ms": latencies_ms}


class Program:
    """A real program under test. `run` puts its CPU-consuming processes in the
    cgroup it is given (`spawn` or `attach` do) and returns its own figures,
    with every request's latency in the window under `latencies_ms` where it
    has them (a row's percentiles pool its runs')."""

    name: str = ""
    # (captured thread count, other count to predict), None if it has none.
    threads: Optional[tuple[int, int]] = None
    # The capture's limit and the targets', relative to the program's demand:
    # room for twice the demand at Kubernetes' 100 ms period, where a bursty
    # program throttles now and then (and its requests arrive as they would
    # unlimited); a quarter less room; the same room in 20 ms periods; a
    # quarter less room with a burst of one quota.
    capture_limit = Limit(100_000, 2.0)
    tighter_limit = Limit(100_000, 1.5)
    shorter_period_limit = Limit(20_000, 2.0)
    burst_limit = Limit(100_000, 1.5, 1.0)
    # What `throughput` counts, for the report; empty: the cost is not measured.
    throughput_unit: str = ""
    # The executables it needs, and the Debian package that has them.
    binaries: tuple[str, ...] = ()
    package: str = ""

    def setup(self) -> None:
        """Refuse, in one line, to run without the program's executables."""
        missing = [b for b in self.binaries if shutil.which(b) is None]
        if missing:
            raise RuntimeError(f"{self.name} needs {', '.join(missing)}: apt-get install -y {self.package}")

    def run(self, cgroup: Path, threads: int, duration_s: float) -> dict[str, float]:
        raise NotImplementedError

    def predicted(self, sim_output: dict) -> dict[str, float]:
        return {}

    def teardown(self) -> None: ...

    def throughput(self, cgroup: Path, run_s: float) -> float:
        """The program's throughput, closed loop, over the measured window of a
        run of `run_s` in `cgroup` (from `LEAD_S` to `run_s - TAIL_S`): what a
        capture's cost is measured in, when `throughput_unit` names it."""
        raise NotImplementedError

    def with_threads(self, capture: Path, threads: int, out: Path) -> Path:
        """A scenario of the capture as if the program ran `threads` threads
        (the captured count is `self.threads[0]`); written beside `out`. The
        default replicates the worker tasks (`is_worker`) round-robin, each
        copy's phases rotated by a fraction of its list so that copies do not
        burst in step; copies keep run and sleep phases only (no wake or wait:
        a copy has no sibling of its own to wake it)."""
        return replicate_workers(capture, threads, out, self.is_worker)

    def is_worker(self, task: str) -> bool:
        """Whether a captured task (`comm-pid`) is one of the program's
        threads that `threads` counts."""
        return True


def replicate_workers(capture: Path, threads: int, out: Path, is_worker: Callable[[str], bool]) -> Path:
    """`out`, a copy of `capture` with `threads` worker tasks: the first
    captured ones kept, then copies (see `Program.with_threads`; the core's
    `phases_file::with_threads`); its phases beside it. The other tasks (a
    parent, a generator) stay as captured."""
    workers = [t["name"] for t in tomllib.loads(capture.read_text())["task"] if is_worker(t["name"])]
    if not workers:
        raise RuntimeError(f"{capture}: no worker task to replicate")
    _native.with_threads(capture, workers, threads, out)
    return out


def write_scenario(capture: Path, tasks: list[dict], sections: dict[str, list[str]], out: Path) -> Path:
    """`out`: `capture`'s scenario with `tasks` for its tasks (each a task's
    table as the capture writes it: `name`, `cgroup`, `start_us` if any), each
    replaying its section of `sections`, written beside `out` as its
    `.phases.gz` (by the core's phases file and TOML writers)."""
    tasks_ = [(t["name"], t["cgroup"], t.get("start_us", 0)) for t in tasks]
    _native.write_replay(capture.read_text(), tasks_, list(sections.items()), out)
    return out


def read_phases(path: Path) -> dict[str, list[str]]:
    """A phases file's sections: task name -> its phase lines (read by the core)."""
    return dict(_native.read_phases(path))


def write_phases(path: Path, sections: dict[str, list[str]]) -> None:
    """A phases file at `path` with `sections` (task name -> its phase
    lines) in their order (written by the core): what `read_phases` reads back."""
    _native.write_phases(path, list(sections.items()))


class Sysbench(Program):
    """sysbench cpu at a fixed event rate (`--rate`: open loop, an event
    generator thread hands events to the workers), so that the load does not
    follow the limit and its latency percentiles say what throttling costs.
    An event computes the primes up to `max_prime`."""

    name = "sysbench"
    binaries = ("sysbench",)
    package = "sysbench"
    threads = (2, 4)
    rate_per_s = 45
    max_prime = 100_000
    throughput_unit = "events/s, closed loop, 2 threads"

    def run(self, cgroup: Path, threads: int, duration_s: float) -> dict[str, float]:
        return self.parse(self._sysbench(cgroup, duration_s, f"--threads={threads}", f"--rate={self.rate_per_s}", f"--rand-seed={TRAFFIC_SEED}", "--histogram=on"))

    def throughput(self, cgroup: Path, run_s: float) -> float:
        """Closed loop (no `--rate`) on 2 threads, so that every CPU cycle a
        capture takes is an event less; events/s of the seconds inside the window."""
        out = self._sysbench(cgroup, run_s, "--threads=2", "--report-interval=1")
        per_s = [(int(t), float(eps)) for t, eps in re.findall(r"^\[ (\d+)s \] thds: \d+ eps: ([\d.]+)", out, re.M)]
        inside = [eps for t, eps in per_s if t - 1 >= LEAD_S and t <= run_s - TAIL_S]
        return statistics.fmean(inside)

    def _sysbench(self, cgroup: Path, run_s: float, *options: str) -> str:
        """sysbench cpu's output for a run of `run_s` (whole seconds) in `cgroup`."""
        argv = ["sysbench", "cpu", f"--cpu-max-prime={self.max_prime}", f"--time={max(1, round(run_s))}", *options, "run"]
        proc = spawn(cgroup, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = proc.communicate(timeout=run_s + 30)
        finally:
            stop(proc)
        if proc.returncode != 0:
            raise RuntimeError(f"sysbench exited {proc.returncode}: {out[-500:]}")
        return out

    @staticmethod
    def parse(out: str) -> dict:
        """events/s, and the latencies of `--histogram` (value, count rows,
        in ascending order) with their p50/p95/p99."""
        figures: dict = {"events_per_s": float(re.search(r"events per second:\s+([\d.]+)", out).group(1))}
        rows = [(float(v), int(n)) for v, n in re.findall(r"^\s+([\d.]+)\s+\|\**\s+(\d+)$", out, re.M)]
        latencies_ms = [value for value, n in rows for _ in range(n)]
        figures.update({f"p{q}_ms": percentile(latencies_ms, q) for q in (50, 95, 99)}, latencies_ms=latencies_ms)
        return figures

    def predicted(self, sim_output: dict) -> dict[str, float]:
        """p50 and p99 of the workers' requests in the replay: a worker's
        request runs from the generator's wake to its next wait, one event
        while events do not queue. The workers are the tasks doing the CPU
        work (at least a tenth of it): the event generator and the main
        thread do little beside them, in many short bursts."""
        tasks = [t for t in sim_output["tasks"].values() if t.get("latency_us")]
        total_us = sum(t["cpu_usec"] for t in tasks)
        return request_percentiles([t for t in tasks if t["cpu_usec"] >= total_us / 10], (50, 99))

    def with_threads(self, capture: Path, threads: int, out: Path) -> Path:
        """The capture itself: at a fixed rate the events do not change with
        the thread count, and on 2 CPUs at most 2 of them run at once either
        way; more threads only add idle waiters (see docs/acceptance.md)."""
        return capture


class StressNg(Program):
    """stress-ng's CPU stressor at a partial load: each worker runs
    `slice_ops` bogo-ops, then sleeps so that its busy share is `load_pct` of
    its wall time, less how late its last sleep ended (stress-cpu.c's `bias`:
    it catches up after a throttle, and the capture replays its sleeps as
    `catchup_us`). Independent workers, so another thread count is the
    captured workers replicated."""

    name = "stress-ng"
    binaries = ("stress-ng",)
    package = "stress-ng"
    threads = (4, 6)
    load_pct = 15
    slice_ops = -3200

    def run(self, cgroup: Path, threads: int, duration_s: float) -> dict[str, float]:
        argv = [
            "stress-ng", "--cpu", str(threads), "--cpu-method", "int64", "--cpu-load", str(self.load_pct),
            "--cpu-load-slice", str(self.slice_ops), "--timeout", f"{max(1, round(duration_s))}s", "--metrics-brief",
        ]
        proc = spawn(cgroup, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = proc.communicate(timeout=duration_s + 30)
        finally:
            stop(proc)
        m = re.search(r"cpu\s+(\d+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+([\d.]+)", out)
        return {"bogo_ops_per_s": float(m.group(3))} if m else {}

    def is_worker(self, task: str) -> bool:
        return task.startswith("stress-ng-cpu")


class WebServer(Program):
    """A web server in the limited cgroup answering `connections` HTTP/1.1
    keep-alive clients outside it, each an h2load process that sends at the
    times of its own Poisson schedule (`rate_per_s / connections`, seeded by
    `TRAFFIC_SEED` and the client: every run sends the same, and the clients
    are independent, where h2load's `--rps` sends every client's requests at
    the same instants), so that every request reaches the server as a wake-up
    from outside the workload (an `until_us` phase in a capture). Each
    request is for one text page of `page_bytes`, gzip-compressed by the
    server every time (its CPU cost). h2load logs each request (its start,
    how long until the response ended), from which the percentiles of the
    driver's window are taken; a connection has one request in flight, so
    one that waits for a throttled server delays the next, which h2load then
    times from when it was sent. A subclass writes the server's
    configuration into its directory (`configure`) and names its command
    (`argv`)."""

    port = 18080
    rate_per_s = 40.0
    # Many connections, each at a low rate, as users are: a connection's next
    # request, overdue when its last answer comes (a gap shorter than that
    # request's latency), is sent at once and taken up without a wake-up,
    # which a capture then holds as one request with the last (at 10
    # requests/s a connection 12 % of Apache's requests in one trial).
    connections = 16
    page_bytes = 128 * 1024
    gzip_level = 6
    # The replay's latency that matches h2load's, which times a request from
    # when it was sent: from its arrival (`from_arrival`) where a server thread
    # serves many connections, from when the thread took it up
    # (`from_start`) where it serves one (its own connection's next
    # request is sent only once the last is answered).
    replay_latency = "from_arrival"

    def __init__(self) -> None:
        self.dir: Optional[Path] = None

    def configure(self, directory: Path) -> None:
        raise NotImplementedError

    def argv(self, directory: Path) -> list[str]:
        raise NotImplementedError

    def setup(self) -> None:
        """A directory for the server's configuration, pid and logs, and the
        page: words drawn with a fixed seed, so that it compresses as text does."""
        super().setup()
        self.dir = Path(tempfile.mkdtemp(prefix=f"throttlelab-{self.name}-"))
        self.dir.chmod(0o755)  # the workers run as nobody
        (self.dir / "www").mkdir()
        rng = random.Random(16)
        words = ["throttle", "quota", "period", "runtime", "slice", "cgroup", "burst", "tick", "timer", "pool", "cpu", "limit"]
        page = " ".join(rng.choice(words) + str(rng.randrange(1000)) for _ in range(self.page_bytes // 8))
        (self.dir / "www" / "index.html").write_text(page[: self.page_bytes])
        self.configure(self.dir)

    def run(self, cgroup: Path, threads: int, duration_s: float) -> dict[str, float]:
        """The server started in `cgroup` for `duration_s`, the clients
        outside it from 0.5 s in (the server is up); the percentiles of the
        requests that ended inside the driver's window (`LEAD_S` to
        `duration_s - TAIL_S`)."""
        assert self.dir is not None
        server = spawn(cgroup, self.argv(self.dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        logs = [self.dir / f"requests-{c}.tsv" for c in range(self.connections)]
        clients: list[subprocess.Popen] = []
        try:
            start_s = time.time()
            time.sleep(0.5)
            if server.poll() is not None:
                raise RuntimeError(f"{self.name} exited {server.returncode} at its start (see {self.dir})")
            load_s = duration_s - 0.5
            for c, log in enumerate(logs):
                log.unlink(missing_ok=True)  # h2load appends
                script, n = self._arrivals(c, load_s)
                clients.append(subprocess.Popen(
                    ["h2load", "--h1", "-c", "1", "-t", "1", "-n", str(n), "--timing-script-file", str(script),
                     "-H", "Accept-Encoding: gzip", "--log-file", str(log)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                ))  # fmt: skip
            for client in clients:
                if client.wait(timeout=load_s + 30) != 0:
                    raise RuntimeError(f"h2load exited {client.returncode}")
        finally:
            for client in clients:
                stop(client)
            stop(server)
        latencies_ms, failed = [], 0
        for log in logs:
            for line in log.read_text().splitlines():
                # start time (us since the epoch), HTTP status, us until the response ended
                started_us, status, took_us = (int(f) for f in line.split("\t")[:3])
                if LEAD_S <= (started_us + took_us) / 1e6 - start_s <= duration_s - TAIL_S:
                    latencies_ms.append(took_us / 1e3)
                    failed += status != 200
            log.unlink()
        if failed:
            raise RuntimeError(f"{self.name} answered {failed} of {len(latencies_ms)} requests with an error (see {self.dir})")
        latencies_ms.sort()
        return {
            "p50_ms": percentile(latencies_ms, 50),
            "p99_ms": percentile(latencies_ms, 99),
            "rps": len(latencies_ms) / (duration_s - TAIL_S - LEAD_S),
            "latencies_ms": latencies_ms,
        }

    def _arrivals(self, client: int, load_s: float) -> tuple[Path, int]:
        """h2load's timing script for `client` over `load_s`, and its length."""
        assert self.dir is not None
        rng = random.Random(1000 * TRAFFIC_SEED + client)
        rate_per_ms = self.rate_per_s / self.connections / 1e3
        lines, at_ms = [], rng.expovariate(rate_per_ms)
        while at_ms < load_s * 1e3:
            lines.append(f"{at_ms:.3f}\thttp://127.0.0.1:{self.port}/\n")
            at_ms += rng.expovariate(rate_per_ms)
        path = self.dir / f"arrivals-{client}.tsv"
        path.write_text("".join(lines))
        return path, len(lines)

    def predicted(self, sim_output: dict) -> dict[str, float]:
        """The serving tasks' requests in the replay (`servers`), pooled, by
        `replay_latency`."""
        tasks = sim_output["tasks"]
        workers = [tasks[name] for name in servers({name: t.get("requests", 0) for name, t in tasks.items()})]
        figures = request_percentiles(workers, (50, 99), self.replay_latency)
        figures["rps"] = sum(t["requests"] for t in workers) / sim_output["duration_s"]
        return figures

    def teardown(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


