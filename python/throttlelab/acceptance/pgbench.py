"""#16 acceptance for PostgreSQL under `pgbench --rate`: a Program for the
acceptance driver (`throttlelab accept pgbench`).

The server (postmaster, its background processes and one backend per client
connection, forked into the postmaster's cgroup) runs inside the limited
cgroup; pgbench runs outside it, so each query reaches its backend as a
wake-up from outside the workload: an `until_us` phase in a capture, whose
latency the simulator reports (docs/capture-guide.md). Each
transaction is one reporting query (`QUERY`: a sequential scan of
pgbench_accounts' 100 000 rows, some 9 ms of CPU), so one of pgbench's
latencies is one such request, and a few of them arriving together make the
bursts that throttle a server at a fraction of its limit. The data directory
is on tmpfs with fsync off: CPU time is what the workload waits for.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import tomllib
from pathlib import Path

from throttlelab.acceptance.cgroup import cgroup_dirs
from throttlelab.acceptance.programs import (
    LEAD_S, TAIL_S, TRAFFIC_SEED, Program as Base, read_phases, request_percentiles, servers, write_scenario,
)
from throttlelab.metrics import percentile

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PGBENCH = "/usr/bin/pgbench"
PG_USER = "postgres"
DATABASE = "postgres"
# pgbench's scale: 100 000 rows in pgbench_accounts, well inside shared_buffers.
SCALE = 1
# Total transactions per second asked of pgbench (--rate), whatever the
# client count: each client's schedule is Poisson at RATE_PER_S / clients.
RATE_PER_S = 30
CLIENTS = 4
OTHER_CLIENTS = 8
# A transaction: one query that scans the table (no parallel workers: the
# server runs it in the client's backend alone).
QUERY = "SELECT sum(abalance) FROM pgbench_accounts;"


class Program(Base):
    """PostgreSQL 15 under `pgbench --rate` with one scan a transaction,
    server in the limited cgroup."""

    name = "pgbench"
    # (captured client connections = backends, another count to predict)
    threads: tuple[int, int] | None = (CLIENTS, OTHER_CLIENTS)
    # No closed-loop throughput run: --rate fixes the throughput.
    throughput_unit = ""

    def __init__(self, rate_per_s: float = RATE_PER_S) -> None:
        self.rate_per_s = rate_per_s
        self.tmp: Path | None = None
        self.server: subprocess.Popen | None = None

    # -- server -------------------------------------------------------------

    def _as_postgres(self, *argv: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(argv, check=True, user=PG_USER, group=PG_USER, extra_groups=[], **kw)

    @property
    def _socket_dir(self) -> Path:
        assert self.tmp is not None
        return self.tmp / "socket"

    def setup(self) -> None:
        """initdb on tmpfs, start the server on a Unix socket of its own, pgbench -i."""
        self.tmp = Path(tempfile.mkdtemp(prefix="throttlelab-pgbench-", dir="/dev/shm"))
        shutil.chown(self.tmp, PG_USER)
        self._socket_dir.mkdir()
        shutil.chown(self._socket_dir, PG_USER)
        data = self.tmp / "data"
        self._as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", PG_USER, stdout=subprocess.DEVNULL)
        settings = {
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "listen_addresses": "",
            "unix_socket_directories": str(self._socket_dir),
            "max_connections": "50",
            "shared_buffers": "128MB",
            "autovacuum": "off",  # no vacuum worker appearing in one run and not the next
            "max_parallel_workers_per_gather": "0",
        }
        argv = [str(PG_BIN / "postgres"), "-D", str(data)]
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        with open(self.tmp / "server.log", "w") as log:
            self.server = subprocess.Popen(
                argv, stdout=log, stderr=log, start_new_session=True, user=PG_USER, group=PG_USER, extra_groups=[]
            )
        deadline = time.monotonic() + 30
        while subprocess.run([str(PG_BIN / "pg_isready"), "-q", "-h", str(self._socket_dir)]).returncode != 0:
            if time.monotonic() > deadline or self.server.poll() is not None:
                raise RuntimeError(f"postgres did not start: see {self.tmp / 'server.log'}")
            time.sleep(0.2)
        self._pgbench("-i", "-q", "-s", str(SCALE), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (self.tmp / "query.sql").write_text(QUERY + "\n")

    def _server_pids(self) -> list[int]:
        """The postmaster and its children (background processes, backends)."""
        assert self.server is not None
        postmaster = self.server.pid
        children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
        return [postmaster, *map(int, children)]

    def _move_server(self, cgroup: Path) -> None:
        """Write the server's processes into `cgroup`'s directories (its
        cpuacct twin too, on v1 where cpuacct is mounted apart: what holds
        the usage)."""
        for pid in self._server_pids():
            for d in cgroup_dirs(cgroup):
                with contextlib.suppress(ProcessLookupError):
                    (d / "cgroup.procs").write_text(str(pid))

    def _pgbench(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return self._as_postgres(PGBENCH, "-h", str(self._socket_dir), *args, DATABASE, **kw)

    # -- one run ------------------------------------------------------------

    def run(self, cgroup: Path, threads: int, duration_s: float) -> dict[str, float]:
        """`pgbench --rate` with `threads` clients for `duration_s`, the
        server in `cgroup` (moved back to the root after, so the cgroup can
        go). Latencies are pgbench's per transaction (--log), of those that
        ended inside the driver's window (`LEAD_S` to `duration_s - TAIL_S`):
        the first half second's connections fork four backends in the cgroup
        and throttle it, which alone made a p99 of 19-53 ms where the window's
        was 0.2 ms. Each is from its scheduled start, so it holds the schedule
        lag (a client still waiting for its previous answer), as pgbench
        reports them. A pgbench thread per client: a thread draws its clients'
        schedules from one random state, so only with one client each does
        `--random-seed` repeat the schedule (pgbench's documentation)."""
        assert self.tmp is not None
        run_s = math.ceil(duration_s)  # pgbench -T takes whole seconds
        logs = Path(tempfile.mkdtemp(prefix="log-", dir=self.tmp))
        shutil.chown(logs, PG_USER)
        self._move_server(cgroup)
        start_s = time.time()
        try:
            self._pgbench(
                f"--random-seed={TRAFFIC_SEED}", "-f", str(self.tmp / "query.sql"), "-n", "-c", str(threads), "-j", str(threads), "--rate", str(self.rate_per_s),
                "-T", str(run_s), "--log", "--log-prefix", str(logs / "tx"),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        finally:
            self._move_server(cgroup.parent)
        latencies_ms, lags_ms = [], []
        for log in logs.glob("tx.*"):
            for line in log.read_text().splitlines():
                # client_id transaction_no time_us script_no epoch_s epoch_us schedule_lag_us
                fields = line.split()
                ended_s = int(fields[4]) + int(fields[5]) / 1e6 - start_s
                if LEAD_S <= ended_s <= duration_s - TAIL_S:
                    latencies_ms.append(int(fields[2]) / 1e3)
                    lags_ms.append(int(fields[6]) / 1e3)
        shutil.rmtree(logs)
        latencies_ms.sort()
        lags_ms.sort()
        return {
            "p50_ms": percentile(latencies_ms, 50),
            "p90_ms": percentile(latencies_ms, 90),
            "p99_ms": percentile(latencies_ms, 99),
            "tps": len(latencies_ms) / (duration_s - TAIL_S - LEAD_S),
            "latencies_ms": latencies_ms,
            "lag_p99_ms": percentile(lags_ms, 99),
        }

    # -- the simulator's side -----------------------------------------------

    def predicted(self, sim_output: dict) -> dict[str, float]:
        """pgbench's figures from a replay: the backends' requests (the
        postmaster is woken from outside only for a connection, the background
        processes by timers)."""
        tasks = sim_output["tasks"]
        backends = [tasks[name] for name in servers({name: t.get("requests", 0) for name, t in tasks.items()})]
        figures = request_percentiles(backends, (50, 90, 99))
        figures["tps"] = sum(t["requests"] for t in backends) / sim_output["duration_s"]
        return figures

    def with_threads(self, capture: Path, threads: int, out: Path) -> Path:
        """The driver's hook: `with_clients` with its first deal."""
        return self.with_clients(capture, threads, out, seed=1)

    @staticmethod
    def with_clients(capture: Path, clients: int, out: Path, seed: int) -> Path:
        """The capture with its requests dealt among `clients` backends
        instead of the captured ones, as `out` (and its `.phases.gz`): pgbench gives each
        client a Poisson schedule at rate / clients, so dealing the captured
        arrivals at random (seeded) gives each backend that schedule. A
        backend is a section woken from outside at least a tenth as often as
        the busiest (`servers`); a request is its `until_us` and what follows
        up to the next. What a backend did before its first request (its
        start) goes to the new backends in turn."""
        captured = tomllib.loads(capture.read_text())["task"]
        sections = read_phases(capture.parent / captured[0]["phases_file"])
        old = servers({name: sum(p.startswith("until_us") for p in lines) for name, lines in sections.items()})
        if any(p == "wait" for name in old for p in sections[name]) or any(
            p.split()[1] in old for lines in sections.values() for p in lines if p.startswith("wake ")
        ):
            raise ValueError(f"{capture}: a backend waits for a sibling or is woken by one; its requests cannot be dealt anew")
        starts, requests = [], []
        for name in old:
            lines = sections.pop(name)
            cuts = [i for i, p in enumerate(lines) if p.startswith("until_us")] + [len(lines)]
            starts.append(lines[: cuts[0]])
            requests += [lines[a:b] for a, b in zip(cuts, cuts[1:])]
        requests.sort(key=lambda r: int(r[0].split()[1]))
        rng = random.Random(seed)
        new = {f"backend-{i}": list(starts[i % len(starts)]) for i in range(clients)}
        for request in requests:
            new[f"backend-{rng.randrange(clients)}"] += request
        sections.update(new)
        tasks = [t for t in captured if t["name"] in sections] + [{"name": n, "cgroup": captured[0]["cgroup"]} for n in new]
        return write_scenario(capture, tasks, sections, out)

    def teardown(self) -> None:
        """Stop the server (fast shutdown) and remove its directory."""
        if self.server is not None and self.server.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.server.pid, signal.SIGINT)
            try:
                self.server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.server.pid, signal.SIGKILL)
                self.server.wait()
        self.server = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
