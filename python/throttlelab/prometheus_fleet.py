"""A synthetic fleet: cAdvisor counter series for N containers, as a fixture
file for throttlelab.prometheus_fixture (docs/prometheus.md, "Synthetic fleet").

Each container draws a shape (SHAPES, by weight) with ``random.Random(seed, i)``:
its limit, threads, burst length and a usage per window. Its counters are
simulated, not drawn: each window's usage runs under the container's own
(hidden) demand model at its limit for prometheus_model.SIM_S, and the window's
increases of container_cpu_usage_seconds_total, _cfs_periods_total,
_cfs_throttled_periods_total and _throttled_seconds_total are that run's,
scaled to the step. So the counters are ones the kernel's mechanism (as the
simulator models it) could have produced, and the burst length a fit should
find is known. Every 25th container restarts mid-range (its counters start
again from zero) and every 20th misses one scrape (a gap).

The containers run on NODES nodes (container i on node i % NODES), each of a
size drawn from NODE_CPUS (by weight) with ``random.Random(seed, "node", j)``:
each window is simulated on its node's CPU count, which cAdvisor's
``machine_cpu_cores`` reports once per node (``node`` and ``instance``
labels, as the kubelet's scrape carries them; no container labels). A
container's throttled seconds grow with the CPUs its threads can spread over,
so the fit reads them on the node's count.
"""

from __future__ import annotations

import json
import math
import random
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from throttlelab.prometheus import MACHINE_CPUS, PERIOD, PERIODS, QUOTA, THREADS, THROTTLED_PERIODS, THROTTLED_SECONDS, USAGE
from throttlelab.prometheus_model import SIM_S, Model, window_run
from throttlelab.runner import Runner

PERIOD_US = 100_000
#: Where the series start (a fixed time, so that a fixture is the same every time).
START_S = 1_800_000_000
_ALNUM = "bcdfghjklmnpqrstvwxz2456789"
#: The fleet's nodes, and their sizes (logical CPUs: weight), as cloud
#: instance types come: 4 to 32 vCPUs, most of them 8 or 16.
NODES = 40
NODE_CPUS = {4: 0.2, 8: 0.4, 16: 0.3, 32: 0.1}


@dataclass(frozen=True)
class Shape:
    """A kind of container: its limit (millicores), threads, burst length (us)
    and usage per window as a fraction of the limit, from a draw."""

    name: str
    weight: float
    kind: str  # Deployment or StatefulSet
    limit_m: Callable[[random.Random], Optional[int]]
    threads: Callable[[random.Random], int]
    burst_us: Callable[[random.Random], int]
    #: (rng, window index, windows) -> usage as a fraction of the limit (or of 1 CPU without one)
    usage: Callable[[random.Random, int, int], float]


SHAPES = (
    # A web service: a fifth to two fifths of its limit, short requests on many threads.
    Shape("web", 0.35, "Deployment", lambda r: r.choice((250, 500, 1000, 2000)), lambda r: r.choice((8, 16, 32)),
          lambda r: r.choice((2_000, 5_000, 10_000)), lambda r, w, n: r.uniform(0.2, 0.4)),
    # kubernetes-mixin #108: a 130m limit at about 30 % average use, long bursts on a few threads.
    Shape("bursty", 0.2, "Deployment", lambda r: r.choice((100, 130, 200)), lambda r: r.choice((2, 4)),
          lambda r: r.choice((50_000, 100_000)), lambda r, w, n: r.uniform(0.25, 0.35)),
    # A daily cycle over the range: from a tenth of the limit to four fifths.
    Shape("diurnal", 0.2, "Deployment", lambda r: r.choice((500, 1000)), lambda r: 4,
          lambda r: r.choice((10_000, 20_000)), lambda r, w, n: 0.45 - 0.35 * math.cos(2 * math.pi * w / n) + r.uniform(-0.03, 0.03)),
    # A batch worker: long steps on one or two threads near its limit.
    Shape("batch", 0.1, "StatefulSet", lambda r: r.choice((1000, 2000)), lambda r: r.choice((1, 2)),
          lambda r: 200_000, lambda r, w, n: r.uniform(0.6, 0.9)),
    # An idle sidecar: never near its limit (advise refuses it).
    Shape("idle", 0.1, "Deployment", lambda r: 500, lambda r: 2, lambda r: 1_000, lambda r, w, n: r.uniform(0.02, 0.06)),
    # No limit at all (listed as "no limit").
    Shape("unlimited", 0.05, "Deployment", lambda r: None, lambda r: 4, lambda r: 5_000, lambda r, w, n: r.uniform(0.1, 0.3)),
)


@dataclass(frozen=True)
class Member:
    """One synthetic container: its labels, shape and hidden demand model."""

    index: int
    shape: Shape
    labels: dict[str, str]
    limit_m: Optional[int]
    model: Model
    usage_cpus: tuple[float, ...]
    #: Its node's machine_cpu_cores.
    node_cpus: int


def node_sizes(seed: int = 1) -> list[int]:
    """Each node's CPU count, drawn from NODE_CPUS (see the module's doc)."""
    sizes = list(NODE_CPUS)
    return [random.Random(f"{seed}-node-{j}").choices(sizes, weights=[NODE_CPUS[c] for c in sizes])[0] for j in range(NODES)]


def node_labels(j: int) -> dict[str, str]:
    """Node j's scrape labels: the kubelet's address and the node's name."""
    return {"job": "kubelet", "instance": f"10.0.{j // 200}.{10 + j % 200}:10250", "node": f"node{j:02d}"}


def members(n: int, windows: int, seed: int = 1) -> list[Member]:
    """The fleet's containers, drawn (see the module's doc)."""
    out = []
    cpus = node_sizes(seed)
    for i in range(n):
        r = random.Random(f"{seed}-{i}")
        shape = r.choices(SHAPES, weights=[s.weight for s in SHAPES])[0]
        limit_m = shape.limit_m(r)
        model = Model(shape.burst_us(r), shape.threads(r))
        scale = (limit_m or 1000) / 1000
        usage = tuple(round(max(0.001, shape.usage(r, w, windows)) * scale, 4) for w in range(windows))
        namespace = ("shop", "search", "payments", "batch", "infra")[i % 5]
        app = f"{shape.name}{i // 5:03d}"
        if shape.kind == "StatefulSet":
            pod = f"{app}-{i % 3}"
        else:
            pod = f"{app}-{''.join(r.choices(_ALNUM, k=10))}-{''.join(r.choices(_ALNUM, k=5))}"
        uid = f"{r.getrandbits(32):08x}-{r.getrandbits(16):04x}-{r.getrandbits(16):04x}-{r.getrandbits(16):04x}-{r.getrandbits(48):012x}"
        cid = f"{r.getrandbits(256):064x}"
        labels = {"namespace": namespace, "pod": pod, "container": "app", "id": f"/kubepods/burstable/pod{uid}/{cid}", **node_labels(i % NODES)}
        out.append(Member(i, shape, labels, limit_m, model, usage, cpus[i % NODES]))
    return out


def fixture(fleet: list[Member], step_s: int, runner: Runner) -> dict[str, Any]:
    """The fleet's series as a prometheus_fixture document, one sample per step."""
    windows = len(fleet[0].usage_cpus) if fleet else 0
    runs = []
    for m in fleet:
        quota = None if m.limit_m is None else m.limit_m * PERIOD_US // 1000
        for w, u in enumerate(m.usage_cpus):
            runs.append(window_run(m.model, u, quota, PERIOD_US, m.node_cpus, seed=1000 + w))
    docs = runner.run_many(runs)
    scale = step_s / SIM_S
    series: list[dict[str, Any]] = []
    for k, m in enumerate(fleet):
        restart = windows // 2 if m.index % 25 == 24 else None
        gap = windows // 3 if m.index % 20 == 19 else None
        totals = dict.fromkeys((USAGE, PERIODS, THROTTLED_PERIODS, THROTTLED_SECONDS), 0.0)
        samples: dict[str, list[list[float]]] = {name: [] for name in (*totals, QUOTA, PERIOD, THREADS)}

        def sample(t: float) -> None:
            for name, v in totals.items():
                samples[name].append([t, round(v, 6)])
            if m.limit_m is not None:
                samples[QUOTA].append([t, m.limit_m * PERIOD_US // 1000])
            samples[PERIOD].append([t, PERIOD_US])
            samples[THREADS].append([t, m.model.threads])

        sample(START_S)
        for w in range(windows):
            cg = docs[k * windows + w]["cgroups"]["container"]
            if w == restart:
                totals = dict.fromkeys(totals, 0.0)
            totals[USAGE] += cg["usage_usec"] * scale / 1e6
            totals[PERIODS] += round(cg["nr_periods"] * scale)
            totals[THROTTLED_PERIODS] += round(cg["nr_throttled"] * scale)
            totals[THROTTLED_SECONDS] += cg["throttled_usec"] * scale / 1e6
            if w != gap:
                sample(START_S + (w + 1) * step_s)
        for name, values in samples.items():
            if values:
                extra = {"cpu": "total"} if name == USAGE else {}
                series.append({"metric": {"__name__": name, **m.labels, **extra}, "samples": values})
    for j, cpus in sorted({m.index % NODES: m.node_cpus for m in fleet}.items()):  # one series per node the fleet uses
        series.append({"metric": {"__name__": MACHINE_CPUS, **node_labels(j)}, "samples": [[START_S + w * step_s, cpus] for w in range(windows + 1)]})
    return {"start_s": START_S, "end_s": START_S + windows * step_s, "step_s": step_s,
            "truth": [{"id": m.labels["id"], "shape": m.shape.name, "burst_us": m.model.burst_us, "threads": m.model.threads, "node_cpus": m.node_cpus} for m in fleet],
            "series": series}


if __name__ == "__main__":
    # python -m throttlelab.prometheus_fleet N WINDOWS STEP_S OUT.json
    n, windows, step = (int(a) for a in sys.argv[1:4])
    with Runner() as runner, open(sys.argv[4], "w") as f:
        json.dump(fixture(members(n, windows), step, runner), f)
