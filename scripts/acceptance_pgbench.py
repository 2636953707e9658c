"""#16 acceptance for PostgreSQL under `pgbench --rate`: a Program for the
acceptance driver (scripts/acceptance.py), and a standalone run of the same
steps (`python scripts/acceptance_pgbench.py --help`).

The server (postmaster, its background processes and one backend per client
connection, forked into the postmaster's cgroup) runs inside the limited
cgroup; pgbench runs outside it, so each query reaches its backend as a
wake-up from outside the workload: an `until_us` phase in a capture, whose
latency the simulator reports (README, "Captured workloads"). pgbench -S
(select-only) makes one query a transaction, so one of pgbench's latencies is
one such request. The data directory is on tmpfs with fsync off: CPU time is
what the workload waits for.

Standalone (root; about 5 minutes at the defaults, 5 runs of 10 s per row):

    python scripts/acceptance_pgbench.py --runs 5 --duration-s 10 -o DIR

captures the server at the capture limit, predicts every row from that capture
with seeds 1..runs, measures each row on the kernel `runs` times, prints
predicted against measured, and writes DIR/capture.toml and DIR/results.json.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PGBENCH = "/usr/bin/pgbench"
PG_USER = "postgres"
DATABASE = "postgres"
# pgbench's scale: 100 000 rows in pgbench_accounts, well inside shared_buffers.
SCALE = 1
# Total transactions per second asked of pgbench (--rate), whatever the
# client count: each client's schedule is Poisson at RATE_PER_S / clients.
RATE_PER_S = 2400
CLIENTS = 4
OTHER_CLIENTS = 8
CGROUP_V1_ROOT = Path("/sys/fs/cgroup/cpu")
CPUACCT_V1_ROOT = Path("/sys/fs/cgroup/cpuacct")


def cgroup_dirs(cgroup: Path) -> list[Path]:
    """`cgroup` and, on v1 with cpuacct mounted apart, its twin of the same name there."""
    if (cgroup / "cpuacct.usage").exists() or not cgroup.is_relative_to(CGROUP_V1_ROOT):
        return [cgroup]
    twin = CPUACCT_V1_ROOT / cgroup.relative_to(CGROUP_V1_ROOT)
    return [cgroup, twin] if twin.is_dir() else [cgroup]


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest rank, as the simulator's `output::latency` computes it."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), -(-len(sorted_values) * p // 100)))
    return sorted_values[int(rank) - 1]


class Program:
    """PostgreSQL 15 under `pgbench -S --rate`, server in the limited cgroup."""

    name = "pgbench"
    # (captured client connections = backends, another count to predict)
    threads: tuple[int, int] | None = (CLIENTS, OTHER_CLIENTS)
    # (period_us, quota_us, burst_us): 0.1 CPU, which the rate fills to some
    # 60-70 % on a quiet host (28 us of CPU a query).
    capture_limit = (100_000, 10_000, 0)
    tighter_limit = (100_000, 8_000, 0)
    shorter_period_limit = (10_000, 1_000, 0)
    burst_limit = (100_000, 10_000, 10_000)
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
        """`pgbench -S --rate` with `threads` clients for `duration_s`, the
        server in `cgroup` (moved back to the root after, so the cgroup can
        go). Latencies are pgbench's per transaction (--log): from its
        scheduled start, so they hold the schedule lag (a client still
        waiting for its previous answer), as pgbench reports them."""
        assert self.tmp is not None
        run_s = math.ceil(duration_s)  # pgbench -T takes whole seconds
        logs = Path(tempfile.mkdtemp(prefix="log-", dir=self.tmp))
        shutil.chown(logs, PG_USER)
        self._move_server(cgroup)
        try:
            self._pgbench(
                "-S", "-n", "-c", str(threads), "-j", "1", "--rate", str(self.rate_per_s),
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
                latencies_ms.append(int(fields[2]) / 1e3)
                lags_ms.append(int(fields[6]) / 1e3)
        shutil.rmtree(logs)
        latencies_ms.sort()
        lags_ms.sort()
        return {
            "p50_ms": percentile(latencies_ms, 50),
            "p90_ms": percentile(latencies_ms, 90),
            "p99_ms": percentile(latencies_ms, 99),
            "tps": len(latencies_ms) / run_s,
            "lag_p99_ms": percentile(lags_ms, 99),
        }

    # -- the simulator's side -----------------------------------------------

    @staticmethod
    def backends(requests: dict[str, int]) -> list[str]:
        """Of the captured tasks and how often each was woken from outside,
        those that serve pgbench's queries: woken at least a tenth as often
        as the busiest (the postmaster is woken from outside only for a
        connection, the background processes by timers)."""
        busiest = max(requests.values(), default=0)
        return [name for name, n in requests.items() if n > 0 and n >= busiest / 10]

    def predicted(self, sim_output: dict) -> dict[str, float]:
        """pgbench's figures from a replay: each percentile as the mean of the
        backends' own, weighted by their requests (the backends serve alike
        clients; the output keeps no single list of all requests)."""
        tasks = sim_output["tasks"]
        backends = [tasks[name] for name in self.backends({name: t.get("requests", 0) for name, t in tasks.items()})]
        requests = sum(t["requests"] for t in backends)
        figures = {
            f"{p}_ms": sum(t["latency_us"][p] * t["requests"] for t in backends) / max(1, requests) / 1e3
            for p in ("p50", "p90", "p99")
        }
        figures["tps"] = requests / sim_output["duration_s"]
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
        the busiest (`backends`); a request is its `until_us` and what follows
        up to the next. What a backend did before its first request (its
        start) goes to the new backends in turn."""
        phases_path = capture.with_name(re.search(r'phases_file = "([^"]+)"', capture.read_text())[1])
        sections: dict[str, list[str]] = {}
        for line in gzip.decompress(phases_path.read_bytes()).decode().splitlines()[1:]:
            if line.startswith("["):
                name = line[1:-1]
                sections[name] = []
            elif line:
                sections[name].append(line)
        old = Program.backends({name: sum(p.startswith("until_us") for p in lines) for name, lines in sections.items()})
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
        phases_out = out.with_suffix(".phases.gz")
        text = "# throttlelab phases v1\n" + "".join(f"[{n}]\n" + "".join(p + "\n" for p in lines) for n, lines in sections.items())
        phases_out.write_bytes(gzip.compress(text.encode()))
        scenario, *tasks = capture.read_text().split("\n[[task]]\n")
        cgroup = re.search(r'\ncgroup = "([^"]+)"', tasks[0])[1]
        kept = [re.sub(r'phases_file = "[^"]+"', f'phases_file = "{phases_out.name}"', t) for t in tasks if re.search(r'name = "([^"]+)"', t)[1] in sections]
        kept += [f'name = "{n}"\ncgroup = "{cgroup}"\nloop = 1\nphases_file = "{phases_out.name}"\n' for n in new]
        out.write_text(scenario + "".join("\n[[task]]\n" + t for t in kept))
        return out

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


# -- standalone: the driver's steps for this program alone ----------------------

PROGRAM = Program  # what scripts/acceptance.py loads from an acceptance_*.py


def configs(program: Program) -> list[tuple[str, tuple[int, int, int], int]]:
    """(label, (period_us, quota_us, burst_us), clients): the captured
    configuration first, then what the simulator predicts from its capture alone."""
    captured, other = program.threads
    return [
        ("captured", program.capture_limit, captured),
        ("tighter quota", program.tighter_limit, captured),
        ("shorter period", program.shorter_period_limit, captured),
        ("burst", program.burst_limit, captured),
        (f"{other} clients", program.capture_limit, other),
    ]


@contextlib.contextmanager
def limited_cgroup(name: str, limit: tuple[int, int, int]):
    """A fresh v1 cpu cgroup of this limit (and its cpuacct twin, for the
    usage), removed after: empty by then, `Program.run` moves the server back."""
    period_us, quota_us, burst_us = limit
    dirs = [CGROUP_V1_ROOT / name, CPUACCT_V1_ROOT / name]
    try:
        for d in dirs:
            d.mkdir()
        (dirs[0] / "cpu.cfs_period_us").write_text(str(period_us))
        (dirs[0] / "cpu.cfs_quota_us").write_text(str(quota_us))
        (dirs[0] / "cpu.cfs_burst_us").write_text(str(burst_us))
        yield dirs[0]
    finally:
        for d in dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # a process still leaving
                    time.sleep(0.1)


def cpu_stat(cgroup: Path) -> dict[str, int]:
    """cpu.stat's counters, and the cpuacct twin's usage in ns."""
    stat = {k: int(v) for k, v in (line.split() for line in (cgroup / "cpu.stat").read_text().splitlines())}
    stat["usage_ns"] = int((cgroup_dirs(cgroup)[-1] / "cpuacct.usage").read_text())
    return stat


def measure(program: Program, cgroup: Path, clients: int, duration_s: float) -> dict[str, float]:
    """One kernel run: the program's figures, the cgroup's throttled ratio and usage."""
    before, t0 = cpu_stat(cgroup), time.monotonic()
    figures = program.run(cgroup, clients, duration_s)
    after, wall_s = cpu_stat(cgroup), time.monotonic() - t0
    periods = after["nr_periods"] - before["nr_periods"]
    figures["throttled_ratio"] = (after["nr_throttled"] - before["nr_throttled"]) / max(1, periods)
    figures["usage_cpus"] = (after["usage_ns"] - before["usage_ns"]) / 1e9 / wall_s
    figures["cpu_us_per_query"] = figures["usage_cpus"] / figures["tps"] * 1e6
    return figures


def capture(program: Program, cgroup: Path, clients: int, duration_s: float, out: Path) -> dict[str, float]:
    """Capture the server while it serves a run one second longer at each
    end (connections made, nothing winding down); returns the run's figures."""
    result: dict[str, float] = {}
    error: list[BaseException] = []

    def serve() -> None:
        try:
            result.update(measure(program, cgroup, clients, duration_s + 2))
        except BaseException as e:  # re-raised in the caller's thread
            error.append(e)

    server = threading.Thread(target=serve)
    server.start()
    try:
        time.sleep(1)
        argv = [sys.executable, "-m", "throttlelab", "capture", "--cgroup", str(cgroup), "--duration", str(duration_s), "-o", str(out)]
        recorder = subprocess.Popen(argv)
        try:
            if recorder.wait() != 0:
                raise RuntimeError(f"throttlelab capture exited {recorder.returncode}")
        except KeyboardInterrupt:
            recorder.send_signal(signal.SIGINT)  # it removes its tracefs instance
            recorder.wait()
            raise
    finally:
        server.join()
    if error:
        raise error[0]
    return result


def simulate(program: Program, capture: Path, clients: int, limit: tuple[int, int, int], runs: int) -> list[dict[str, float]]:
    """The replay under this limit with the simulator's own timer phases
    (seeds 1..runs); for another client count, seed k also deals the requests."""
    import throttlelab

    cgroup = re.search(r'\[\[cgroup\]\]\nname = "([^"]+)"', capture.read_text())[1]
    sets = [f"cgroup.{cgroup}.{key}={value}" for key, value in zip(("period_us", "quota_us", "burst_us"), limit)]
    predictions = []
    for seed in range(1, runs + 1):
        scenario = capture
        if clients != program.threads[0]:
            scenario = Program.with_clients(capture, clients, capture.with_name(f"{capture.stem}-{clients}-clients.toml"), seed)
        out = throttlelab.run(str(scenario), set=[*sets, f"seed={seed}"])
        figures = program.predicted(out)
        figures["throttled_ratio"] = out["cgroups"][cgroup]["throttled_ratio"]
        figures["usage_cpus"] = out["cgroups"][cgroup]["usage_usec"] / 1e6 / out["duration_s"]
        # What the capture holds a query to cost; a kernel run's differs on a busy host.
        figures["cpu_us_per_query"] = figures["usage_cpus"] / figures["tps"] * 1e6
        predictions.append(figures)
    return predictions


def verdict(key: str, predicted: list[float], measured: list[float]) -> str:
    """#16's targets: throttled ratio's predicted mean inside the kernel's
    range or within 3 points, usage within 5 %, p99 within 25 %."""
    p, m = statistics.mean(predicted), statistics.mean(measured)
    if key == "throttled_ratio":
        return "ok" if min(measured) <= p <= max(measured) or abs(p - m) <= 0.03 else "MISS"
    tolerance = {"usage_cpus": 0.05, "p99_ms": 0.25}.get(key)
    if tolerance is None:
        return ""
    return "ok" if abs(p - m) <= tolerance * m else "MISS"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="kernel runs and simulator seeds per configuration (5)")
    parser.add_argument("--duration-s", type=int, default=10, help="each kernel run's and the capture's length (10)")
    parser.add_argument("--rate", type=float, default=RATE_PER_S, help=f"pgbench --rate, transactions per second ({RATE_PER_S})")
    parser.add_argument("-o", "--out", type=Path, default=Path("acceptance-pgbench"), help="directory for the capture and results.json")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("acceptance_pgbench: needs root (cgroups, tracefs, the postgres user)", file=sys.stderr)
        return 2
    # SIGTERM and SIGHUP unwind like Ctrl-C: the finally blocks stop the server and remove the cgroups.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    args.out.mkdir(parents=True, exist_ok=True)
    program = Program(args.rate)
    rows = []
    try:
        program.setup()
        cap = args.out / "capture.toml"
        _, limit, clients = configs(program)[0]
        with limited_cgroup(f"throttlelab-pgbench-{os.getpid()}", limit) as cgroup:
            during_capture = capture(program, cgroup, clients, args.duration_s, cap)
        print("during the capture:", json.dumps(during_capture), flush=True)
        for k, (label, limit, clients) in enumerate(configs(program)):
            predicted = simulate(program, cap, clients, limit, args.runs)
            measured = []
            for run in range(args.runs):
                with limited_cgroup(f"throttlelab-pgbench-{os.getpid()}-{k}-{run}", limit) as cgroup:
                    measured.append(measure(program, cgroup, clients, args.duration_s))
            rows.append({"config": label, "limit": limit, "clients": clients, "predicted": predicted, "measured": measured})
            print(f"\n{label}: cfs_period_us, cfs_quota_us, cfs_burst_us {limit}, {clients} clients", flush=True)
            print(f"  {'':16} {'predicted mean':>14} {'kernel mean':>12} {'kernel range':>18}")
            for key in ("throttled_ratio", "usage_cpus", "p50_ms", "p90_ms", "p99_ms", "tps", "cpu_us_per_query"):
                p = [f[key] for f in predicted]
                m = [f[key] for f in measured]
                span = f"{min(m):.3f}-{max(m):.3f}"
                print(f"  {key:16} {statistics.mean(p):14.3f} {statistics.mean(m):12.3f} {span:>18}  {verdict(key, p, m)}", flush=True)
    except KeyboardInterrupt:
        print("acceptance_pgbench: interrupted; the server, its cgroups and files are removed", file=sys.stderr)
        return 130
    finally:
        program.teardown()
        (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
