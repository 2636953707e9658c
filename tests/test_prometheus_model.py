"""The demand model's families on counters simulated from a known scenario
(throttlelab.prometheus_model): threads that wake together are not mistaken for
independent bursts, and a container held at its limit throughout is refused."""

from __future__ import annotations

import pytest

from throttlelab.prometheus import Container, Window
from throttlelab.prometheus_advise import Batched, _consistent, _row, _search
from throttlelab.prometheus_model import SIM_S, Fit, Model, aligned_models, wakes, window_run
from throttlelab.runner import Runner, simulate

STEP_S = 30
PERIOD_US = 100_000


@pytest.fixture(scope="module")
def runner():
    with Runner(workers=2) as r:
        yield Batched(r)


def counters(runner: Batched, model: Model, demand_cpus: float, quota_us: int, windows: int = 6) -> Container:
    """A container whose windows are ``model`` at ``demand_cpus`` under ``quota_us``,
    simulated (a seed per window) and scaled to STEP_S, as cAdvisor would count them."""
    docs = runner.run_many([window_run(model, demand_cpus, quota_us, PERIOD_US, 8, seed=1000 + w) for w in range(windows)])
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
    assert _consistent(row, fit) and "threads waking together do" in row["reason"]
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
