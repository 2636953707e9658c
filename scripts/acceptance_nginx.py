"""#16 acceptance for nginx under HTTP clients that arrive at random
(`h2load --timing-script-file`, Poisson): a Program for the acceptance driver
(`python scripts/acceptance.py --programs nginx`).

nginx (its master and `worker_processes` workers, each an event loop on
epoll) runs inside the limited cgroup and serves one text page, gzip-compressed
for each request (the CPU a web server spends on a response: some 7 ms here
for 128 KiB); `CONNECTIONS` h2load processes run outside it, each one
keep-alive HTTP/1.1 connection sending at the times of its own Poisson
schedule, so that every request reaches a worker as a wake-up from outside
the workload (an `until_us` phase in a capture). h2load logs each request
(`--log-file`: its start and how long until the response ended), from which
the percentiles of the driver's window are taken. A connection has one
request in flight: one that waits for a throttled worker delays the next,
which h2load then times from when it was sent, not from when it was due.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from acceptance import LEAD_S, TAIL_S, percentile, request_percentiles, servers, spawn, stop

PORT = 18080
# Requests per second over all connections; each connection's schedule is Poisson at RATE_PER_S / CONNECTIONS.
RATE_PER_S = 40
CONNECTIONS = 4
WORKERS = 2
GZIP_LEVEL = 6
# The page: 128 KiB of words drawn with a fixed seed, so that it compresses as text does.
PAGE_BYTES = 128 * 1024

CONFIG = """worker_processes {workers};
daemon off;
master_process on;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    # 1000 by default: then nginx closes the connection, and h2load's client ends.
    keepalive_requests 1000000;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    default_type text/plain;
    gzip on;
    gzip_min_length 0;
    gzip_comp_level {gzip_level};
    gzip_types text/plain;
    server {{
        listen 127.0.0.1:{port};
        root {dir}/www;
    }}
}}
"""


class Program:
    """nginx 1.22 answering h2load's Poisson clients, the server in the limited cgroup."""

    name = "nginx"
    # Requests follow connections, which a capture does not hold: no other
    # worker count is predicted (docs/acceptance.md).
    threads = None
    binaries = ("nginx", "h2load")
    package = "nginx-light nghttp2-client"

    def __init__(self, rate_per_s: float = RATE_PER_S) -> None:
        self.rate_per_s = rate_per_s
        self.dir: Path | None = None
        self.runs = 0

    def setup(self) -> None:
        """A directory for nginx's configuration, pid and logs."""
        super().setup()  # the driver's Program: the binaries are there
        self.dir = Path(tempfile.mkdtemp(prefix="throttlelab-nginx-"))
        self.dir.chmod(0o755)  # the workers run as nobody
        (self.dir / "nginx.conf").write_text(CONFIG.format(workers=WORKERS, dir=self.dir, port=PORT, gzip_level=GZIP_LEVEL))
        (self.dir / "www").mkdir()
        rng = random.Random(16)
        words = ["throttle", "quota", "period", "runtime", "slice", "cgroup", "burst", "tick", "timer", "pool", "cpu", "limit"]
        page = " ".join(rng.choice(words) + str(rng.randrange(1000)) for _ in range(PAGE_BYTES // 8))
        (self.dir / "www" / "index.html").write_text(page[:PAGE_BYTES])

    def run(self, cgroup: Path, threads: int, duration_s: float) -> dict[str, float]:
        """nginx started in `cgroup` for `duration_s`, h2load outside it from
        0.5 s in (the workers are up); the percentiles of the requests that
        ended inside the driver's window (`LEAD_S` to `duration_s - TAIL_S`)."""
        assert self.dir is not None
        server = spawn(cgroup, ["nginx", "-c", str(self.dir / "nginx.conf"), "-p", str(self.dir)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        logs = [self.dir / f"requests-{c}.tsv" for c in range(CONNECTIONS)]
        clients: list[subprocess.Popen] = []
        try:
            start_s = time.time()
            time.sleep(0.5)
            load_s = duration_s - 0.5
            for c, log in enumerate(logs):
                log.unlink(missing_ok=True)  # h2load appends
                script = self._arrivals(c, load_s)
                clients.append(subprocess.Popen(
                    ["h2load", "--h1", "-c", "1", "-t", "1", "-n", str(script.read_text().count("\n")),
                     "--timing-script-file", str(script), "-H", "Accept-Encoding: gzip", "--log-file", str(log)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                ))  # fmt: skip
            for client in clients:
                if client.wait(timeout=load_s + 30) != 0:
                    raise RuntimeError(f"h2load exited {client.returncode}")
        finally:
            for client in clients:
                stop(client)
            stop(server)
        self.runs += 1
        latencies_ms, failed = [], 0
        for line in (line for log in logs for line in log.read_text().splitlines()):
            # start time (us since the epoch), HTTP status, us until the response ended
            started_us, status, took_us = (int(f) for f in line.split("\t")[:3])
            ended_s = (started_us + took_us) / 1e6 - start_s
            if LEAD_S <= ended_s <= duration_s - TAIL_S:
                latencies_ms.append(took_us / 1e3)
                failed += status != 200
        for log in logs:
            log.unlink()
        if failed:
            raise RuntimeError(f"nginx answered {failed} of {len(latencies_ms)} requests with an error (see {self.dir / 'error.log'})")
        latencies_ms.sort()
        return {
            "p50_ms": percentile(latencies_ms, 50),
            "p99_ms": percentile(latencies_ms, 99),
            "rps": len(latencies_ms) / (duration_s - TAIL_S - LEAD_S),
        }

    def _arrivals(self, client: int, load_s: float) -> Path:
        """A timing script for h2load's `client`: Poisson arrivals at
        RATE_PER_S / CONNECTIONS over `load_s`, seeded by the run and the
        client, so that each run draws its own and the clients are
        independent (h2load's `--rps` sends every client's requests at the
        same instants, which a worker then serves back to back)."""
        assert self.dir is not None
        rng = random.Random(1000 * self.runs + client)
        rate_per_ms = self.rate_per_s / CONNECTIONS / 1e3
        lines, at_ms = [], rng.expovariate(rate_per_ms)
        while at_ms < load_s * 1e3:
            lines.append(f"{at_ms:.3f}\thttp://127.0.0.1:{PORT}/\n")
            at_ms += rng.expovariate(rate_per_ms)
        path = self.dir / f"arrivals-{client}.tsv"
        path.write_text("".join(lines))
        return path

    def predicted(self, sim_output: dict) -> dict[str, float]:
        """The workers' requests in the replay, each percentile weighted by
        their request counts (the master is woken from outside only by signals)."""
        tasks = sim_output["tasks"]
        workers = [tasks[name] for name in servers({name: t.get("requests", 0) for name, t in tasks.items()})]
        figures = request_percentiles(workers, ("p50", "p99"))
        figures["rps"] = sum(t["requests"] for t in workers) / sim_output["duration_s"]
        return figures

    def teardown(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


PROGRAM = Program  # what scripts/acceptance.py loads from an acceptance_*.py
