"""#16 acceptance for nginx: a Program for the acceptance driver
(`throttlelab accept nginx`).

nginx (its master and `WORKERS` workers, each an event loop on epoll) runs
inside the limited cgroup as the driver's `WebServer`: four h2load clients
outside it, each a keep-alive connection with its own Poisson schedule, and
a 128 KiB page gzip-compressed for each request (some 7 ms of CPU here). A
worker serves every connection it accepted, so a request that arrives while
its worker is busy with another connection's is taken up without a wake-up:
the capture sees the two as one request (docs/acceptance.md).
"""

from __future__ import annotations

from pathlib import Path

from throttlelab.acceptance.programs import WebServer

WORKERS = 2

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


class Program(WebServer):
    """nginx 1.22 with `WORKERS` worker processes."""

    name = "nginx"
    # Requests follow connections, which a capture does not hold: no other
    # worker count is predicted (docs/acceptance.md).
    threads = None
    binaries = ("nginx", "h2load")
    package = "nginx-light nghttp2-client"

    def configure(self, directory: Path) -> None:
        (directory / "nginx.conf").write_text(CONFIG.format(workers=WORKERS, dir=directory, port=self.port, gzip_level=self.gzip_level))

    def argv(self, directory: Path) -> list[str]:
        return ["nginx", "-c", str(directory / "nginx.conf"), "-p", str(directory)]
