"""cAdvisor's counters from Prometheus, as windows per container.

Every series is read with a ``query_range`` (prometheus-api-client) of the raw
counter at ``--step``: the value at each step is the newest sample at or before
it (Prometheus' lookback), so one window is what a counter added between two
consecutive steps. A counter that went down was reset (a restarted container):
its increase is its new value, as ``rate()`` takes it. A step without a sample
(a gap: the container was not scraped) ends the window before it; no window
spans it. A window whose limit (``container_spec_cpu_quota``/``_period``)
changed between its ends is dropped, since it mixes two limits.

A container is identified by its ``namespace``, ``pod``, ``container`` labels
(the kubelet's cAdvisor sets them from the container runtime) or, for a raw
cgroup (a cAdvisor with no runtime, as tools/cadvisor), by its ``id`` (the
cgroup's path). Pod-level cgroups of the kubelet (``container=""`` with a
``pod``) and the pause container (``container="POD"``) are not containers.

The node's CPU count is cAdvisor's ``machine_cpu_cores``, joined to a
container by the scrape's ``node`` label where both carry it, else by
``instance`` (the cAdvisor scraped): throttled seconds grow with it. The
node's other load in a window is its root container's usage (``id="/"``, the
whole machine) less the container's own, joined the same way: it takes CPUs
from the container's threads, which changes its throttled seconds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Optional

from throttlelab import kubelet_cgroups

#: cAdvisor's counters and gauges this reads, by what they become in a window.
USAGE = "container_cpu_usage_seconds_total"
PERIODS = "container_cpu_cfs_periods_total"
THROTTLED_PERIODS = "container_cpu_cfs_throttled_periods_total"
THROTTLED_SECONDS = "container_cpu_cfs_throttled_seconds_total"
QUOTA = "container_spec_cpu_quota"
PERIOD = "container_spec_cpu_period"
THREADS = "container_threads"
COUNTERS = (USAGE, PERIODS, THROTTLED_PERIODS, THROTTLED_SECONDS)
GAUGES = (QUOTA, PERIOD, THREADS)
#: The node's logical CPUs (cAdvisor's machine collector; no container labels).
MACHINE_CPUS = "machine_cpu_cores"
#: cAdvisor's root container: the whole node's usage, read unselected.
NODE_USAGE = f'{USAGE}{{id="/"}}'

#: The labels that say which container a series is.
IDENTITY = ("namespace", "pod", "container", "id")
#: The labels that say which node a series came from, in the order tried.
NODE = ("node", "instance")

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")
_UNIT_S = {"ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class PrometheusError(ValueError):
    """A server, selector or option that cannot give windows (a user error: exit code 2)."""


def duration_s(text: str, option: str) -> float:
    """A Prometheus duration (``30s``, ``10m``, ``7d``) in seconds."""
    m = _DURATION.match(text.strip())
    if not m or float(m.group(1)) <= 0:
        raise PrometheusError(f"{option} {text!r} is not a duration such as 30s, 10m, 2h or 7d")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def matchers(selector: str) -> list[tuple[str, str, str]]:
    """``--selector``'s label matchers (``namespace="shop", pod=~"web-.*"``),
    checked here so that a typo is one line, not Prometheus' parse error."""
    text = selector.strip().removeprefix("{").removesuffix("}").strip()
    out, pos = [], 0
    while pos < len(text):
        m = _MATCHER.match(text, pos)
        if not m or m.end() == pos:
            raise PrometheusError(f"--selector {selector!r}: expected label matchers such as namespace=\"shop\", pod=~\"web-.*\"")
        out.append((m.group(1), m.group(2), m.group(3)))
        pos = m.end()
    return out


def promql(metric: str, selector: str) -> str:
    """``metric{selector}``."""
    inner = ", ".join(f'{k}{op}"{v}"' for k, op, v in matchers(selector))
    return f"{metric}{{{inner}}}"


@dataclass(frozen=True)
class Window:
    """What a container's counters added between two consecutive steps."""

    start_s: float  # when the samples at its ends were taken
    end_s: float
    usage_s: float  # container_cpu_usage_seconds_total's increase
    periods: float  # container_cpu_cfs_periods_total's
    throttled_periods: float
    throttled_s: float
    quota_us: Optional[int]  # None: no limit
    period_us: int
    threads: int
    #: The node's usage (its root container's) less this container's, in CPUs;
    #: 0 where the root container is not scraped.
    other_cpus: float = 0.0

    @property
    def usage_cpus(self) -> float:
        return self.usage_s / (self.end_s - self.start_s)

    @property
    def throttled_ratio(self) -> float:
        return self.throttled_periods / self.periods if self.periods else 0.0


@dataclass
class Container:
    """One container's labels and windows."""

    labels: dict[str, str]
    windows: list[Window] = field(default_factory=list)
    resets: int = 0  # counter resets seen (restarts)
    gaps: int = 0  # steps without a sample
    #: Its node's machine_cpu_cores (the newest sample), None where not scraped.
    node_cpus: Optional[int] = None

    @property
    def name(self) -> str:
        """namespace/pod/container, or the cgroup's id."""
        parts = [self.labels.get(k, "") for k in ("namespace", "pod", "container")]
        return "/".join(parts) if all(parts) else self.labels.get("id", "/".join(p for p in parts if p))

    @property
    def limited(self) -> bool:
        return bool(self.windows) and self.windows[-1].quota_us is not None


def identity(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple((k, labels[k]) for k in IDENTITY if k in labels)


def is_container(labels: dict[str, str]) -> bool:
    """Not a kubelet pod-level cgroup nor a pause container; per-CPU usage
    series (``cpu`` other than ``total``) are not the container's total."""
    if labels.get("cpu", "total") != "total":
        return False
    if "pod" in labels and labels.get("container", "") in ("", "POD"):
        return False
    return True


#: series as query_range answers them: [{"metric": {...}, "values": [[t, "v"], ...]}]
Series = list[dict[str, Any]]
Query = Callable[[str], Series]


def connect(url: str, start_s: float, end_s: float, step_s: float) -> Query:
    """A function from PromQL to its ``query_range`` answer over [start, end] at
    ``step``, on the server at ``url`` (prometheus-api-client); the server
    unreachable or not Prometheus is one line."""
    import requests
    from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
    from urllib3.util.retry import Retry

    if not re.match(r"^https?://[^/\s]+", url):
        raise PrometheusError(f"--prometheus {url!r} is not a URL such as http://127.0.0.1:9090")
    # One quick retry, not the client's default three with backoff: a server
    # that is not there says so in a second.
    prom = PrometheusConnect(url=url, disable_ssl=True, retry=Retry(total=1, backoff_factor=0.1))
    start = datetime.fromtimestamp(start_s, timezone.utc)
    end = datetime.fromtimestamp(end_s, timezone.utc)

    def query(q: str) -> Series:
        try:
            return prom.custom_query_range(q, start_time=start, end_time=end, step=f"{step_s:g}s", timeout=60)
        except requests.exceptions.RequestException as e:
            raise PrometheusError(f"cannot reach Prometheus at {url}: {type(e).__name__}") from None
        except PrometheusApiClientException as e:
            raise PrometheusError(f"Prometheus at {url} refused {q}: {str(e).strip().splitlines()[0]}") from None
        except ValueError as e:  # an answer that is not JSON: not a Prometheus
            raise PrometheusError(f"{url} did not answer as Prometheus does ({e.__class__.__name__})") from None

    return query


def _values(series: dict[str, Any]) -> dict[float, float]:
    return {round(float(t), 3): float(v) for t, v in series["values"] if not math.isnan(float(v))}


def containers(query: Query, selector: str, steps: list[float]) -> list[Container]:
    """Every container ``selector`` matches, with its windows at ``steps``
    (the query's timestamps), in the order of their names."""
    data: dict[str, dict[tuple, dict[float, float]]] = {}
    labels: dict[tuple, dict[str, str]] = {}
    nodes: dict[tuple, dict[str, str]] = {}
    for metric in (*COUNTERS, *GAUGES):
        data[metric] = {}
        for s in query(promql(metric, selector)):
            if not is_container(s["metric"]):
                continue
            key = identity(s["metric"])
            labels.setdefault(key, {k: v for k, v in s["metric"].items() if k in IDENTITY})
            nodes.setdefault(key, {k: v for k, v in s["metric"].items() if k in NODE})
            data[metric][key] = _values(s)
    cpus = node_cpus(query(MACHINE_CPUS))
    node_usage = by_node(query(NODE_USAGE))
    node_taken = by_node(query(f"timestamp({NODE_USAGE})"))
    # When each step's usage sample was taken: a window's usage is per second of
    # the time between its samples, not between its steps (a scrape lands up to
    # an interval off a step, which would put 20 % of noise on a 10 s window).
    data["timestamp"] = {identity(s["metric"]): _values(s) for s in query(f"timestamp({promql(USAGE, selector)})") if is_container(s["metric"])}
    keys = sorted(data[USAGE], key=lambda k: labels[k].get("id", "") + "/".join(v for _, v in k))
    out = []
    for key in keys:
        c = Container(labels[key])
        c.node_cpus = next((cpus[(k, nodes[key][k])] for k in NODE if (k, nodes[key].get(k)) in cpus), None)
        node = next(((k, nodes[key][k]) for k in NODE if (k, nodes[key].get(k)) in node_usage), None)
        series = {m: data[m].get(key, {}) for m in data}
        series["node"], series["node_timestamp"] = node_usage.get(node, {}), node_taken.get(node, {})  # type: ignore[arg-type]
        _windows(c, series, [round(t, 3) for t in steps])
        out.append(c)
    return out


def node_cpus(series: Series) -> dict[tuple[str, str], int]:
    """machine_cpu_cores' newest sample by each NODE label its series carries
    (("instance", "10.0.0.7:10250") -> 16); a series with no positive sample
    is left out."""
    out = {}
    for s in series:
        values = _values(s)
        if values and (cpus := int(values[max(values)])) > 0:
            out.update({(k, s["metric"][k]): cpus for k in NODE if k in s["metric"]})
    return out


def by_node(series: Series) -> dict[tuple[str, str], dict[float, float]]:
    """A node-wide series' values by each NODE label it carries."""
    out: dict[tuple[str, str], dict[float, float]] = {}
    for s in series:
        out.update({(k, s["metric"][k]): _values(s) for k in NODE if k in s["metric"]})
    return out


def _increase(a: float, b: float) -> tuple[float, bool]:
    """A counter's increase from ``a`` to ``b``, and whether it was reset."""
    return (b, True) if b < a else (b - a, False)


def _windows(c: Container, series: dict[str, dict[float, float]], steps: list[float]) -> None:
    usage = series[USAGE]
    for t0, t1 in zip(steps, steps[1:]):
        if t0 not in usage or t1 not in usage:
            c.gaps += t1 not in usage
            continue
        inc = {}
        for m in COUNTERS:
            s = series[m]
            if t0 in s and t1 in s:
                inc[m], reset = _increase(s[t0], s[t1])
                c.resets += reset and m == USAGE
            else:
                inc[m] = 0.0
        quota = series[QUOTA].get(t1)
        period = series[PERIOD].get(t1, 100_000.0)
        if series[QUOTA].get(t0) != quota or series[PERIOD].get(t0, 100_000.0) != period:
            continue  # the limit changed inside the window
        limited = quota is not None and quota > 0
        threads = max(series[THREADS].get(t0, 0), series[THREADS].get(t1, 0))
        taken = series["timestamp"]
        start, end = taken.get(t0, t0), taken.get(t1, t1)
        if end <= start:
            continue  # one sample at both ends: no time between them
        c.windows.append(Window(
            start, end, inc[USAGE], inc[PERIODS], inc[THROTTLED_PERIODS], inc[THROTTLED_SECONDS],
            int(quota) if limited else None, int(period), int(threads), _other_cpus(series, t0, t1, inc[USAGE] / (end - start)),
        ))


def _other_cpus(series: dict[str, dict[float, float]], t0: float, t1: float, own_cpus: float) -> float:
    """The node's usage between steps ``t0`` and ``t1`` (per second of the time
    between its samples) less the container's own; 0 where the root container
    has no sample at either step or was reset."""
    node, taken = series["node"], series["node_timestamp"]
    if t0 not in node or t1 not in node or node[t1] < node[t0]:
        return 0.0
    seconds = taken.get(t1, t1) - taken.get(t0, t0)
    return max(0.0, (node[t1] - node[t0]) / seconds - own_cpus) if seconds > 0 else 0.0


def steps(end_s: float, range_s: float, step_s: float) -> list[float]:
    """The query's timestamps: from end - range to end, every step, as Prometheus
    lays them (whole seconds: the client sends start and end so)."""
    if step_s != int(step_s) or range_s < step_s:
        raise PrometheusError(f"--step must be whole seconds and at most --range (got {step_s:g} s, range {range_s:g} s)")
    n = int(range_s // step_s)
    end = int(end_s)
    return [float(end - (n - i) * int(step_s)) for i in range(n + 1)]


#: Pod name suffixes the controllers add: a Deployment's ReplicaSet hash and the
#: pod's own, a StatefulSet's ordinal, a DaemonSet's or Job's one suffix.
_DEPLOYMENT = re.compile(r"^(.+)-[bcdfghjklmnpqrstvwxz2456789]{6,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$")
_STATEFULSET = re.compile(r"^(.+)-(\d+)$")


def workload(labels: dict[str, str]) -> tuple[str, str]:
    """(kind, name) of the controller that owns the container's pod, as far as
    its name tells: a Deployment's pods are NAME-HASH-XXXXX, a StatefulSet's
    NAME-ORDINAL; otherwise the pod itself; for a raw cgroup of the kubelet's
    layout, the pod's UID."""
    pod = labels.get("pod", "")
    if pod:
        if m := _DEPLOYMENT.match(pod):
            return "Deployment", m.group(1)
        if m := _STATEFULSET.match(pod):
            return "StatefulSet", m.group(1)
        return "Pod", pod
    if parsed := kubelet_cgroups.parse(labels.get("id", "")):
        return "Pod", parsed[0]
    return "cgroup", labels.get("id", "")
