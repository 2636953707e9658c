"""A Prometheus stand-in for tests and the fleet benchmark: answers
``/api/v1/query_range`` (and ``/-/ready``) for ``metric{matchers}`` from a
fixture file of raw samples, as Prometheus would: at each step, the newest
sample at or before it, within the 5-minute lookback.

Fixture file (JSON): ``{"series": [{"metric": {"__name__": ..., labels...},
"samples": [[t_s, value], ...]}]}``. ``python -m throttlelab.prometheus_fixture
FILE [PORT]`` serves one and prints its URL.
"""

from __future__ import annotations

import bisect
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from throttlelab.prometheus import matchers

LOOKBACK_S = 300.0
_QUERY = re.compile(r"^\s*(timestamp\()?\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{.*\})?\s*(\))?\s*$")


def _matches(labels: dict[str, str], selector: list[tuple[str, str, str]]) -> bool:
    for k, op, v in selector:
        have = labels.get(k, "")
        ok = {"=": have == v, "!=": have != v, "=~": re.fullmatch(v, have) is not None, "!~": re.fullmatch(v, have) is None}[op]
        if not ok:
            return False
    return True


class Fixture:
    """Raw samples, by metric name."""

    def __init__(self, doc: dict[str, Any]):
        self.by_name: dict[str, list[tuple[dict[str, str], list[float], list[float]]]] = {}
        for s in doc["series"]:
            samples = sorted((float(t), float(v)) for t, v in s["samples"])
            self.by_name.setdefault(s["metric"]["__name__"], []).append(
                (s["metric"], [t for t, _ in samples], [v for _, v in samples])
            )

    def query_range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        m = _QUERY.match(query)
        if not m or bool(m.group(1)) != bool(m.group(4)):
            raise ValueError(f"unsupported query {query!r} (only metric{{matchers}} and timestamp() of one)")
        name, stamps = m.group(2), bool(m.group(1))
        selector = matchers(m.group(3) or "")
        steps, t = [], start
        while t <= end + 1e-9:
            steps.append(t)
            t += step
        result = []
        for labels, ts, vs in self.by_name.get(name, []):
            if not _matches(labels, selector):
                continue
            values = []
            for t in steps:
                i = bisect.bisect_right(ts, t + 1e-9) - 1
                if i >= 0 and t - ts[i] <= LOOKBACK_S:
                    values.append([t, f"{ts[i] if stamps else vs[i]:.17g}"])
            if values:  # timestamp() drops the metric's name, as Prometheus does
                result.append({"metric": {k: v for k, v in labels.items() if k != "__name__" or not stamps}, "values": values})
        return result


def serve(fixture: Fixture, port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``fixture`` on loopback in a daemon thread; the server and its URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urlparse(self.path)
            if url.path == "/-/ready":
                self._send(200, {})
                return
            if url.path != "/api/v1/query_range":
                self._send(404, {"status": "error", "error": "not found"})
                return
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            try:
                result = fixture.query_range(q["query"], float(q["start"]), float(q["end"]), float(q["step"].rstrip("s")))
            except (KeyError, ValueError) as e:
                self._send(400, {"status": "error", "errorType": "bad_data", "error": str(e)})
                return
            self._send(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        srv, url = serve(Fixture(json.load(f)), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print(url, flush=True)
    threading.Event().wait()
