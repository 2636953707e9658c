"""The node's other load beside each band (its root container's usage less the
container's) and the aligned family's timed kind (rt-app's `runtime` on its
`timer`), on fixture answers (throttlelab.prometheus, prometheus_model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from throttlelab.prometheus import MACHINE_CPUS, USAGE, containers, steps
from throttlelab.prometheus_advise import advise_prometheus
from throttlelab.prometheus_fixture import Fixture
from throttlelab.prometheus_model import NODE_BURST_US, SCENARIO, Model, aligned_models, aligned_text, throttled_share, window_run
from throttlelab.runner import Runner, simulate

RUN_2 = Path(__file__).resolve().parent.parent / "docs" / "prometheus-live" / "run-2"


def _series(points, **labels):
    return {"metric": {"__name__": USAGE, "cpu": "total", "instance": "n1:8080", **labels}, "samples": points}


def _windows(doc):
    f = Fixture(doc)
    at = [0.0, 60.0, 120.0, 180.0, 240.0]
    return containers(lambda q: f.query_range(q, 0, 240, 60), 'id="/c"', at)[0].windows


def test_other_load_is_the_root_containers_usage_less_the_containers_own(monkeypatch):
    """/c uses 0.5 CPUs; the node's root container 1.2, then 2.0, then resets
    (a reboot of cAdvisor's counter: no other load known), then has no sample
    (no other load known). Without a root series every window's is 0."""
    monkeypatch.setattr("throttlelab.prometheus_fixture.LOOKBACK_S", 30.0)
    ts = [0, 60, 120, 180, 240]
    own = _series([[t, 0.5 * t] for t in ts], id="/c")
    root = _series([[0, 100.0], [60, 172.0], [120, 292.0], [180, 10.0]], id="/")
    assert [round(w.other_cpus, 6) for w in _windows({"series": [own, root]})] == [0.7, 1.5, 0.0, 0.0]
    assert [w.other_cpus for w in _windows({"series": [own]})] == [0.0] * 4
    # Another node's root container is not this one's.
    elsewhere = _series([[t, 2.0 * t] for t in ts], id="/", instance="n2:8080")
    assert [w.other_cpus for w in _windows({"series": [own, elsewhere]})] == [0.0] * 4


def test_window_runs_put_the_node_load_beside_the_container():
    """Below 0.01 CPUs the scenario is the idle node's, as before; above it a
    cgroup without a limit runs the load in NODE_BURST_US bursts on every CPU."""
    m = Model(10_000, 3)
    assert window_run(m, 0.3, 20_000, 100_000, 2, other_cpus=0.005).text == SCENARIO
    text = window_run(m, 0.3, 20_000, 100_000, 2, other_cpus=0.7).text
    assert '[[cgroup]]\nname = "node"' in text and f"cost_us = {NODE_BURST_US}" in text
    assert "workers = 2" in text and f"rate_per_s = {0.7 * 1e6 / NODE_BURST_US:g}" in text
    timed = Model(10_000, 3, 40_000, 800_000, timed=True)
    assert "runtime_us = 10000" in aligned_text(timed, 0.375) and 'timer = { period_us = 40000 }' in aligned_text(timed, 0.375)
    assert "run_us = 10000" in aligned_text(Model(10_000, 3, 40_000, 800_000), 0.375)
    assert not any(m.timed for m in aligned_models((4,))) and all(m.timed for m in aligned_models((4,), timed=True))


def _share(other_cpus: float, seed: int) -> float:
    """rt-app's set of the live acceptance (3 threads busy 10 ms on a 40 ms timer,
    20 times, then 0.8 s asleep) under 500m on 2 CPUs: its throttled share."""
    timed = Model(10_000, 3, 40_000, 800_000, timed=True)
    cg = simulate(*window_run(timed, 0.375, 50_000, 100_000, 2, seed=seed, other_cpus=other_cpus))["cgroups"]["container"]
    return throttled_share(cg["throttled_usec"] / 1e6, cg["nr_throttled"], 2, 100_000)


def test_the_nodes_other_load_cuts_timed_threads_throttled_seconds():
    """The mechanism the fit now simulates: 0.7 CPUs of other load on the 2 CPUs
    (run-2's four other programs) leaves rt-app's threads fewer runqueues to be
    held back on, so its throttled seconds per throttled period fall (0.26-0.29
    alone, 0.15-0.17 beside it; the kernel's in run-2: 0.16-0.18)."""
    alone = [_share(0.0, s) for s in (1, 2, 3)]
    beside = [_share(0.7, s) for s in (1, 2, 3)]
    assert max(beside) < 0.75 * min(alone), (alone, beside)


def _run2(root: bool) -> dict:
    """run-2's samples (docs/prometheus-live/run-2) with machine_cpu_cores = 2,
    and (``root``) a root container whose usage is the five programs' sum."""
    doc = json.loads((RUN_2 / "samples.json").read_text())
    usage = [s for s in doc["series"] if s["metric"]["__name__"] == USAGE]
    at = [t for t, _ in usage[0]["samples"]]
    doc["series"].append({"metric": {"__name__": MACHINE_CPUS, "instance": "127.0.0.1:8080"}, "samples": [[t, 2.0] for t in at]})
    if root:
        n = min(len(s["samples"]) for s in usage)
        points = [[max(s["samples"][i][0] for s in usage), sum(s["samples"][i][1] for s in usage)] for i in range(n)]
        doc["series"].append(_series(points, id="/", instance="127.0.0.1:8080"))
    return doc


def _advise_run2(root: bool) -> dict:
    plan = json.loads((RUN_2 / "plan.json").read_text())
    f = Fixture(_run2(root))
    at = steps(plan["end_s"], plan["minutes"] * 60, 30)
    with Runner(workers=2) as runner:
        [row] = advise_prometheus(lambda q: f.query_range(q, at[0], at[-1], 30), 'id="/tl-accept35-rt-app"', at, 0.05, runner)
    return row


def test_run2_rt_app_is_advised_beside_its_neighbours_and_asks_more_alone():
    """rt-app in run-2 ran beside four programs using 0.65-0.68 CPUs of the node's
    2. With the node's other load beside it, the timed kind of the aligned
    family (rt-app's own events) reproduces its counters and it is advised.
    Simulated on an idle node its throttled seconds come out too high, so the
    fit is refused or settles on a bigger demand: 1483m against 1004m since
    EEVDF's wake-up ties go to the woken (before that, refused)."""
    beside, alone = _advise_run2(True), _advise_run2(False)
    assert beside["status"] == "advice" and "threads waking together" in beside["reason"], beside
    assert beside["limit_m"] < beside["recommended_m"] < 2000, beside
    assert alone["status"] == "refused" or alone["recommended_m"] > beside["recommended_m"], (alone, beside)
