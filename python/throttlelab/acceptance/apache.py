"""#16 acceptance for the Apache HTTP server with its prefork MPM: a Program
for the acceptance driver (`throttlelab accept apache`).

Apache's prefork MPM serves each connection in a process of its own, one
request at a time, so with keep-alive connections every request reaches the
process that serves it as a wake-up from outside the workload, even when
several arrive together: the case that nginx's event loop hides from a
capture (docs/acceptance.md). It runs inside the limited cgroup as the
driver's `WebServer` (four Poisson h2load clients, a 128 KiB page that
mod_deflate compresses for each request). The parent process, which forks
the children and keeps spare ones, runs in the cgroup with them.
"""

from __future__ import annotations

from pathlib import Path

from throttlelab.acceptance.programs import WebServer

MODULES = Path("/usr/lib/apache2/modules")

CONFIG = """ServerRoot "{dir}"
ServerName localhost
Listen 127.0.0.1:{port}
PidFile {dir}/httpd.pid
ErrorLog {dir}/error.log
LoadModule mpm_prefork_module {modules}/mod_mpm_prefork.so
LoadModule authz_core_module {modules}/mod_authz_core.so
LoadModule filter_module {modules}/mod_filter.so
LoadModule deflate_module {modules}/mod_deflate.so
LoadModule dir_module {modules}/mod_dir.so
LoadModule mime_module {modules}/mod_mime.so
User nobody
Group nogroup
# Enough processes for the clients and a few spare, started at once (no fork
# while the driver measures); keep-alive connections held for the whole run.
StartServers {servers}
MinSpareServers 1
MaxSpareServers {servers}
MaxRequestWorkers {servers}
ServerLimit {servers}
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 60
DocumentRoot "{dir}/www"
<Directory "{dir}/www">
    Require all granted
</Directory>
DirectoryIndex index.html
TypesConfig /etc/mime.types
AddOutputFilterByType DEFLATE text/html
DeflateCompressionLevel {gzip_level}
"""


class Program(WebServer):
    """Apache 2.4, prefork: a process per connection."""

    name = "apache"
    # One process a connection: the client count is the connections', which
    # the driver's clients fix.
    threads = None
    binaries = ("apache2", "h2load")
    package = "apache2 nghttp2-client"
    replay_latency = "from_start"

    def configure(self, directory: Path) -> None:
        (directory / "httpd.conf").write_text(
            CONFIG.format(dir=directory, port=self.port, modules=MODULES, servers=self.connections + 2, gzip_level=self.gzip_level)
        )

    def argv(self, directory: Path) -> list[str]:
        return ["apache2", "-f", str(directory / "httpd.conf"), "-DFOREGROUND"]
