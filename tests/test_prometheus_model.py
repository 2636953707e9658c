"""The demand model's families on counters simulated from a known scenario
(throttlelab.prometheus_model): threads that wake together are not mistaken for
independent bursts; a container held at its limit throughout is refused unless
its throttled seconds, on its node's CPU count (machine_cpu_cores), bound its
demand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from throttlelab.prometheus import MACHINE_CPUS, Container, Window, containers, steps
from throttlelab.prometheus_advise import Batched, _consistent, _row, _search, advise_prometheus
from throttlelab.prometheus_fixture import Fixture
import throttlelab.prometheus_model as prometheus_model
from throttlelab.prometheus_model import SIM_S, Fit, Model, aligned_models, seconds_miss, sleep_us, wakes, window_run
from throttlelab.runner import Runner, simulate

STEP_S = 30
PERIOD_US = 100_000


@pytest.fixture(scope="module")
def runner():
    with Runner(workers=2) as r:
        yield Batched(r)


def counters(runner: Batched, model: Model, demand_cpus: float, quota_us: int, windows: int = 6, cpus: int = 8) -> Container:
    """A container whose windows are ``model`` at ``demand_cpus`` under ``quota_us``
    on ``cpus`` CPUs, simulated (a seed per window) and scaled to STEP_S, as
    cAdvisor would count them."""
    docs = runner.run_many([window_run(model, demand_cpus, quota_us, PERIOD_US, cpus, seed=1000 + w) for w in range(windows)])
    c, scale = Container({"id": "/synthetic"}), STEP_S / SIM_S
    for w, doc in enumerate(docs):
        cg = doc["cgroups"]["container"]
        c.windows.append(Window(
            w * STEP_S, (w + 1) * STEP_S, cg["usage_usec"] * scale / 1e6, round(cg["nr_periods"] * scale),
            round(cg["nr_throttled"] * scale), cg["throttled_usec"] * scale / 1e6, quota_us, PERIOD_US, model.threads,
        ))  # fmt: skip
    return c


def test_wakes_give_the_demand_and_none_where_it_cannot_rest():
    m = Model(10_000, 3, 40_000, 800_000)  # rt-app's set: 3 threads, 10 ms every 40 ms, 20 times, 0.8 s rest
    assert wakes(m, 0.375) == 20
    assert wakes(m, 0.75) is None and wakes(m, 0.9) is None  # 0.75 CPUs is all it does without resting
    assert all(m.aligned and m.threads == 4 for m in aligned_models((4,)))


def test_threads_waking_together_are_found_where_independent_bursts_miss(runner):
    """4 threads that all run 25 ms every 50 ms, 10 times, then rest 2 s (0.4 CPUs
    of demand under a 1-CPU limit: 70-85 % of its periods throttled at 35 % mean usage).
    No independent-burst model reproduces its counters; the aligned family does,
    the scenario's own model among those kept, and the limit searched under them
    keeps the scenario itself at the target."""
    truth = Model(25_000, 4, 50_000, 2_000_000)
    c = counters(runner, truth, 0.4, 100_000)
    assert all(0.6 <= w.throttled_ratio <= 0.9 and w.usage_cpus < 0.4 for w in c.windows)
    fit = Fit(c)
    fit.take(runner.run_many(fit.runs()))
    assert fit.consistent == [] and not fit.closest[1].aligned
    assert fit.widen()
    fit.take(runner.run_many(fit.runs()))
    assert truth in fit.consistent_models
    assert not fit.unbounded
    row = _row(c)
    assert _consistent(row, fit) and "threads waking together" in row["reason"]
    _search(runner, [(row, fit)], 0.05)
    assert row["status"] == "advice" and row["recommended_m"] > row["limit_m"], row
    # The scenario under the recommended limit (seeds the fit never saw).
    quota_us = row["recommended_m"] * PERIOD_US // 1000
    ratios = [simulate(*window_run(truth, 0.4, quota_us, PERIOD_US, 8, seed=s))["cgroups"]["container"]["throttled_ratio"] for s in (7, 8, 9)]
    assert max(ratios) <= 0.05, (row["recommended_m"], ratios)


def test_a_container_at_its_limit_in_every_window_is_refused_in_words(runner):
    """Independent 10 ms bursts at 1.5x a 200m limit: every window at the limit,
    nearly every period throttled. Its counters fit any demand up to twice
    what came through, so the row says it cannot tell instead of taking the
    highest."""
    c = counters(runner, Model(10_000, 3), 0.3, 20_000)
    assert all(w.usage_cpus > 0.19 and w.throttled_ratio > 0.9 for w in c.windows)
    fit = Fit(c)
    fit.take(runner.run_many(fit.runs()))
    assert fit.consistent and fit.unbounded
    row = _row(c)
    assert not _consistent(row, fit)
    assert row["status"] == "refused" and "at its limit in every window" in row["reason"] and "raise its limit" in row["reason"]


def _fitted(runner: Batched, c: Container) -> Fit:
    """``c``'s fit, family after family, as advise_prometheus runs it."""
    fit = Fit(c)
    fit.take(runner.run_many(fit.runs()))
    while fit.widen():
        fit.take(runner.run_many(fit.runs()))
    return fit


def test_closed_loop_sleep_gives_the_demand():
    m = Model(10_000, 2, closed=True)
    assert sleep_us(m, 0.3) == 56_667  # each thread 10 ms of every 66.7 ms: 0.15 CPUs
    assert sleep_us(m, 2.0) == 0 and sleep_us(m, 3.0) == 0  # both threads never sleep


def test_throttled_seconds_bound_a_saturated_closed_loop(runner):
    """stress-ng --cpu 2 --cpu-load 15 under 200m, as a model: 2 threads that each run
    10 ms, then sleep, 0.3 CPUs of demand, on a 2-CPU node. Every window sits at the
    limit with all its periods throttled. Without the node's CPU count (throttled
    seconds not fitted) its counters fit up to 2x its usage and it is refused, as
    before; with machine_cpu_cores, its throttled seconds per throttled period (a
    third of both CPUs' period: its threads are not all held back) rule out the
    independent bursts, whose queue never drains above the limit, and bound the
    closed loop's demand: advice, with the truth inside the demands kept, and the
    scenario itself at or below the target under the recommendation (seeds the fit
    never saw)."""
    truth = Model(10_000, 2, closed=True)
    c = counters(runner, truth, 0.3, 20_000, cpus=2)
    assert all(w.usage_cpus > 0.195 and w.throttled_ratio > 0.95 for w in c.windows)
    blind = _fitted(runner, c)
    assert blind.cpus == 8 and not blind.fits_seconds and blind.unbounded
    c.node_cpus = 2
    fit = _fitted(runner, c)
    assert fit.cpus == 2 and fit.fits_seconds and fit.models[0].family != "independent"
    assert truth in fit.consistent_models and not fit.unbounded
    kept = [v for v in fit.consistent if v.model == truth]
    assert min(min(v.demands) for v in kept) <= 0.3 * 1.01 and max(max(v.demands) for v in kept) >= 0.3 * 0.99
    row = _row(c)
    assert _consistent(row, fit) and "threads that run, then sleep" in row["reason"]
    _search(runner, [(row, fit)], 0.05)
    assert row["status"] == "advice" and row["limit_m"] < row["recommended_m"] < 2000, row
    quota_us = row["recommended_m"] * PERIOD_US // 1000
    ratios = [simulate(*window_run(truth, 0.3, quota_us, PERIOD_US, 2, seed=s))["cgroups"]["container"]["throttled_ratio"] for s in (7, 8, 9)]
    assert max(ratios) <= 0.05, (row["recommended_m"], ratios)


def test_one_thread_always_runnable_is_still_refused(runner):
    """One thread of independent 10 ms bursts at 1.5x a 200m limit: its one
    runqueue is throttled from the quota's end to the period's whatever the
    demand above the limit, so throttled seconds say nothing more, and the row
    still refuses with the node's CPU count known."""
    c = counters(runner, Model(10_000, 1), 0.3, 20_000, cpus=2)
    c.node_cpus = 2
    fit = _fitted(runner, c)
    assert fit.fits_seconds and fit.consistent and fit.unbounded
    row = _row(c)
    assert not _consistent(row, fit) and "at its limit in every window" in row["reason"]


def test_throttled_seconds_of_another_seed_are_within_the_bound(runner):
    """The bound is two standard errors of each side: the same scenario with other
    seeds (its counters, six 30 s windows, against one 20 s simulation) is
    within it, on 1-4 runqueues."""
    for model, demand, cpus in ((Model(10_000, 2, closed=True), 0.3, 2), (Model(5_000, 4, closed=True), 0.5, 4), (Model(10_000, 1), 0.3, 2)):
        c = counters(runner, model, demand, 20_000, cpus=cpus)
        c.node_cpus = cpus
        [band] = [b for b in Fit(c).bands[:1]]
        for seed in (21, 22, 23):
            doc = simulate(*window_run(model, demand, 20_000, PERIOD_US, cpus, seed=seed))
            assert seconds_miss(band, doc, min(model.threads, cpus), PERIOD_US) <= 1, (model, seed)


def _node_series(name: str, value: float, **labels):
    return {"metric": {"__name__": name, **labels}, "samples": [[t, value] for t in (0, 60, 120)]}


def test_machine_cpu_cores_by_node_then_instance():
    """Each container gets its node's machine_cpu_cores: by the node label where
    both carry it, else by instance; none scraped, or not a count, is None."""
    usage = "container_cpu_usage_seconds_total"
    doc = {"series": [
        _node_series(usage, 1.0, id="/a", instance="10.0.0.1:10250", node="n1", cpu="total"),
        _node_series(usage, 1.0, id="/b", instance="10.0.0.2:8080"),
        _node_series(usage, 1.0, id="/c", instance="10.0.0.3:8080"),
        _node_series(usage, 1.0, id="/d", instance="10.0.0.4:8080"),
        _node_series(MACHINE_CPUS, 16, instance="other:9100", node="n1"),
        _node_series(MACHINE_CPUS, 4, instance="10.0.0.2:8080"),
        _node_series(MACHINE_CPUS, 0, instance="10.0.0.4:8080"),
        {"metric": {"__name__": MACHINE_CPUS, "instance": "10.0.0.3:8080"}, "samples": [[0, "NaN"]]},
    ]}  # fmt: skip
    f = Fixture(doc)
    found = {c.labels["id"]: c.node_cpus for c in containers(lambda q: f.query_range(q, 0, 120, 60), "", [0.0, 60.0, 120.0])}
    assert found == {"/a": 16, "/b": 4, "/c": None, "/d": None}


def test_a_row_says_when_machine_cpu_cores_is_missing(runner, monkeypatch):
    """No machine_cpu_cores for its node: the row says so and what was assumed."""
    c = counters(runner, Model(10_000, 3), 0.3, 20_000)
    note = "no machine_cpu_cores for its node: simulated on 8 CPUs, throttled seconds not fitted"
    for cpus, noted in ((None, True), (8, False)):
        c.node_cpus = cpus
        monkeypatch.setattr("throttlelab.prometheus_advise.containers", lambda *_: [c])
        [row] = advise_prometheus(lambda q: [], "", [], 0.05, runner.runner)
        assert (note in row["reason"]) == noted, row["reason"]


RUN_2_MERGED = Path(__file__).resolve().parent.parent / "docs" / "prometheus-live" / "run-2-merged"


def _run2(name: str) -> Container:
    """Run-2's workload ``name`` as advise reads it from run-2-merged's samples
    (its counters at its first limit, the node's other load, 2 CPUs)."""
    plan = json.loads((RUN_2_MERGED / "plan.json").read_text())
    f = Fixture(json.loads((RUN_2_MERGED / "samples.json").read_text()))
    at = steps(plan["end_s"], plan["minutes"] * 60, 30)
    [c] = containers(lambda q: f.query_range(q, at[0], at[-1], 30), f'id="/tl-accept35-{name}"', at)
    return c


def test_run2_pgbench_a_model_low_in_every_band_is_not_kept(runner, monkeypatch):
    """Run-2's pgbench at 300m: fixed 5 ms bursts on its 9 counted threads are
    within every band's bound but throttle less than it in all four (0.31/0.21/
    0.17/0.13 against 0.38/0.29/0.23/0.17), and as its only model they advised
    406m, where the kernel throttled 8.7 % of periods. Judged over the bands
    (Stouffer's z), they are biased low and not kept; spread 5 ms bursts are,
    and the limit searched under them is above 406m (on the kernel, 432m
    throttled 1.7 %: docs/prometheus-live/run-2-prom6)."""
    c = _run2("pgbench")
    fit = _fitted(runner, c)
    assert Model(5_000, 9) not in fit.consistent_models and fit.biased_low >= 1, fit.consistent_models
    assert Model(5_000, 9, cost_cv=0.75) in fit.consistent_models, fit.consistent_models
    row = _row(c)
    assert _consistent(row, fit)
    _search(runner, [(row, fit)], 0.05)
    assert row["status"] == "advice" and row["recommended_m"] > 406, row
    # Without the test across bands, the fixed 5 ms model is kept.
    monkeypatch.setattr(prometheus_model, "BIAS_Z", float("inf"))
    assert Model(5_000, 9) in _fitted(runner, c).consistent_models


def test_spread_bursts_throttle_more_than_fixed_ones_of_the_same_mean(runner):
    """The service's cost_cv: lognormal request costs with the mean of the
    fixed ones. At 0.2 CPUs of 5 ms bursts under 406m (the quota holds 8 of
    them), a spread of 0.75 puts more demand in some periods: more of them
    are throttled over three seeds, and a request's p99 is longer."""
    def run(cv: float) -> list[dict]:
        return runner.run_many([window_run(Model(5_000, 4, cost_cv=cv), 0.2, 40_600, PERIOD_US, 2, seed=s) for s in (1, 2, 3)])
    fixed, spread = run(0.0), run(0.75)
    throttled = [sum(d["cgroups"]["container"]["nr_throttled"] for d in docs) for docs in (fixed, spread)]
    assert throttled[0] < throttled[1], throttled
    assert all(d["tasks"]["bursts"]["latency_us"]["p50"] == 5_000 for d in fixed)
    assert all(f["tasks"]["bursts"]["latency_us"]["p99"] < s["tasks"]["bursts"]["latency_us"]["p99"] for f, s in zip(fixed, spread))
