"""--latency-metric: a request-latency histogram read from fixture answers
(the p99 as histogram_quantile has it, summed over handlers, across a reset),
its malformed forms refused in one line, and the p99 the model predicts."""

from __future__ import annotations

import math

import pytest

from helpers import cli
from throttlelab.prometheus import PrometheusError, containers, steps
from throttlelab.prometheus_fixture import Fixture, serve
from throttlelab.prometheus_latency import check_name, observed, quantile
from throttlelab.prometheus_model import Fit, Plan
from throttlelab.runner import Runner

METRIC = "http_request_duration_seconds"
LE = ("0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "+Inf")
#: Requests per window in each bucket (not cumulative): 1000 a window, the
#: 99th percentile half-way into the 0.1-0.25 s bucket over any whole windows.
PER_WINDOW = (500, 200, 150, 80, 55, 10, 3, 1, 1)
START, STEP, WINDOWS = 1_800_000_000, 60, 8
POD = {"namespace": "shop", "pod": "web-7d9f8b6c5d-x2x4z", "container": "app"}


def _cumulative(scale: float = 1.0) -> list[float]:
    out, total = [], 0.0
    for n in PER_WINDOW:
        total += n * scale
        out.append(total)
    return out


def _histogram(labels: dict[str, str], handlers: int = 2, reset_at: int | None = None, drop_le: str | None = None) -> list[dict]:
    """NAME_bucket series for one container, its requests split over
    ``handlers``; the first handler's counters restart at window ``reset_at``."""
    series = []
    for h in range(handlers):
        for le, per in zip(LE, _cumulative(1 / handlers)):
            if le == drop_le:
                continue
            total, samples = 0.0, [[START, 0.0]]
            for w in range(WINDOWS):
                total = per if (h == 0 and w == reset_at) else total + per
                samples.append([START + (w + 1) * STEP, total])
            series.append({"metric": {"__name__": f"{METRIC}_bucket", **labels, "handler": f"/h{h}", "le": le}, "samples": samples})
    return series


def _observed(series: list[dict], selector: str = "") -> dict:
    f = Fixture({"series": series})
    at = steps(START + WINDOWS * STEP, WINDOWS * STEP, STEP)
    return observed(lambda q: f.query_range(q, at[0], at[-1], STEP), METRIC, selector, at)


def test_quantile_is_histogram_quantiles():
    buckets = [(float(le), c) for le, c in zip(LE, _cumulative())]
    # 990 of 1000: 985 at le=0.1, 995 at le=0.25: half-way.
    assert quantile(0.99, buckets) == (pytest.approx(0.175), 0.1, 0.25)
    # In the first bucket: from 0.
    assert quantile(0.5, buckets) == (0.005, 0.0, 0.005)
    # In the +Inf bucket: its lower bound, which is all a histogram can say.
    assert quantile(0.9995, buckets) == (1.0, 1.0, math.inf)


def test_observed_sums_handlers_across_a_reset():
    series = _histogram(POD, handlers=2, reset_at=4)
    series += _histogram({**POD, "pod": "web-7d9f8b6c5d-b5b5b", "container": "sidecar"}, handlers=1)
    # Without pod labels (a node-level exporter): nothing to join it to.
    series += _histogram({"job": "node"}, handlers=1)
    seen = _observed(series)
    assert set(seen) == {("shop", POD["pod"], "app"), ("shop", "web-7d9f8b6c5d-b5b5b", "sidecar")}
    app = seen[("shop", POD["pod"], "app")]
    # The reset lost nothing: each window's increase counts (8000 requests).
    assert app.requests == pytest.approx(8 * 1000)
    assert (app.p99_ms, app.bucket_low_ms, app.bucket_high_ms) == (pytest.approx(175.0), 100.0, 250.0)
    # The selector's namespace/pod/container matchers select; cAdvisor's labels are left out.
    assert set(_observed(series, 'namespace="shop", container="app", job="kubelet"')) == {("shop", POD["pod"], "app")}


def test_a_milliseconds_histogram_is_read_in_ms():
    series = [{**s, "metric": {**s["metric"], "__name__": "rpc_latency_milliseconds_bucket"}} for s in _histogram(POD, handlers=1)]
    f = Fixture({"series": series})
    at = steps(START + WINDOWS * STEP, WINDOWS * STEP, STEP)
    seen = observed(lambda q: f.query_range(q, at[0], at[-1], STEP), "rpc_latency_milliseconds", "", at)
    assert seen[("shop", POD["pod"], "app")].p99_ms == pytest.approx(0.175)


@pytest.mark.parametrize("series, message", [
    ([], f"--latency-metric {METRIC}: no {METRIC}_bucket series match --selector ''"),
    (_histogram(POD, handlers=1, drop_le="+Inf"), f"shop/{POD['pod']}/app has no le=\"+Inf\" bucket"),
    ([{"metric": {"__name__": f"{METRIC}_bucket", **POD}, "samples": [[START, 1.0]]}], "without a numeric le label"),
    ([{"metric": {"__name__": f"{METRIC}_bucket", **POD, "le": "fast"}, "samples": [[START, 1.0]]}], "without a numeric le label"),
    # A larger le counting fewer requests: not a Prometheus histogram.
    ([{**s, "samples": [[t, v * (3 if s["metric"]["le"] == "0.005" else 1)] for t, v in s["samples"]]} for s in _histogram(POD, handlers=1)],
     "buckets are not cumulative"),
])
def test_malformed_histograms_are_one_error(series, message):
    with pytest.raises(PrometheusError, match=None) as e:
        _observed(series)
    assert message in str(e.value)


@pytest.mark.parametrize("name, message", [
    (f"{METRIC}_bucket", f"name the histogram ({METRIC}), not one of its series"),
    (f"{METRIC}_count", f"name the histogram ({METRIC})"),
    ("http request", "is not a metric name"),
    ('x{le="1"}', "is not a metric name"),
])
def test_bad_metric_names(name, message):
    with pytest.raises(PrometheusError) as e:
        check_name(name)
    assert message in str(e.value)


def _advise(url: str, *args: str):
    end = str(START + WINDOWS * STEP)
    return cli("advise", "--prometheus", url, "--range", f"{WINDOWS}m", "--step", "1m", "--end", end, "--max-throttled", "0.05", *args)


@pytest.mark.parametrize("args, message", [
    (("--max-p99-ms", "200"), "--max-p99-ms with --prometheus needs --latency-metric NAME"),
    (("--latency-metric", f"{METRIC}_bucket", "--max-p99-ms", "200"), "not one of its series"),
    (("--latency-metric", "no_such_seconds"), "--latency-metric no_such_seconds: no no_such_seconds_bucket series match"),
])
def test_the_cli_refuses_in_one_line(args, message):
    """The server holds one container's counters (tests/test_prometheus.py's
    fleet is not needed): the refusal comes before or at the histogram."""
    from throttlelab.prometheus_fleet import fixture, members

    with Runner(workers=1) as runner:
        doc = fixture(members(1, WINDOWS, seed=3), STEP, runner)
    server, url = serve(Fixture(doc))
    try:
        result = _advise(url, *args)
    finally:
        server.shutdown()
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("throttlelab: error: ") and message in lines[0], result.stderr


def test_at_its_own_limit_the_prediction_is_the_observed_p99():
    """The p99 predicted is the observed one moved by the model's own change
    (docs/prometheus.md, "Latency"): at the container's own limit, none; at a
    lower one, more (its bursts wait out more throttling), and never less at
    a lower limit than at a higher."""
    from throttlelab.prometheus_fleet import fixture, members

    fleet = [m for m in members(40, WINDOWS, seed=3) if m.shape.name == "bursty"][:1]
    assert fleet
    with Runner(workers=2) as runner:
        doc = fixture(fleet, STEP, runner)
        f = Fixture(doc)
        at = steps(START + WINDOWS * STEP, WINDOWS * STEP, STEP)
        (c,) = containers(lambda q: f.query_range(q, at[0], at[-1], STEP), "", at)
        fit = Fit(c)
        fit.take(runner.run_many(fit.runs()))
        assert fit.consistent and all(v.p99_us for v in fit.consistent)
        plan = Plan(fit, 0.05, observed_p99_ms=5000.0)
        assert plan.predicts_p99
        p99 = {}
        for quota_us in (fit.quota_us // 2, fit.quota_us, 4 * fit.quota_us):
            p99[quota_us] = plan.outcome(runner.run_many(plan.runs((quota_us, fit.period_us, 0)))).p99_ms
    assert p99[fit.quota_us] == 5000.0
    assert p99[fit.quota_us // 2] > 5000.0 >= p99[4 * fit.quota_us]
    # Without a histogram, no p99.
    assert not Plan(fit, 0.05).predicts_p99


@pytest.fixture(scope="module")
def bursty_url():
    """Two bursty containers of the synthetic fleet (kubernetes-mixin #108's
    shape), the first with a histogram whose p99 is 5.25 s: buckets 30x the
    client default's, so that every service model's own p99 is under it."""
    from throttlelab.prometheus_fleet import fixture, members

    fleet = [m for m in members(60, WINDOWS, seed=3) if m.shape.name == "bursty"][:2]
    assert len(fleet) == 2
    with Runner(workers=2) as runner:
        doc = fixture(fleet, STEP, runner)
    first = {k: fleet[0].labels[k] for k in ("namespace", "pod", "container")}
    for s in _histogram(first, handlers=1):
        le = s["metric"]["le"]
        doc["series"].append({**s, "metric": {**s["metric"], "le": le if le == "+Inf" else f"{30 * float(le):g}"}})
    server, url = serve(Fixture(doc))
    yield url, fleet[0].labels["pod"], fleet[1].labels["pod"]
    server.shutdown()


def test_rows_carry_the_observed_and_predicted_p99(bursty_url):
    import json

    url, first, second = bursty_url
    result = _advise(url, "--json", "--latency-metric", METRIC, "--workers", "2")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["latency_metric"] == METRIC
    rows = {r["pod"]: r for r in doc["containers"]}
    assert rows[first]["observed_p99_ms"] == pytest.approx(5250.0)
    assert rows[first]["status"] == "advice" and rows[first]["predicted_p99_ms"] is not None, rows[first]
    assert rows[second]["observed_p99_ms"] is None and rows[second]["predicted_p99_ms"] is None
    assert f"no {METRIC} requests for it: p99 not predicted" in rows[second]["reason"]
    table = _advise(url, "--latency-metric", METRIC, "--workers", "2")
    assert table.exit_code == 0 and "pred. p99" in table.stdout and "5250.0" in table.stdout, table.stdout


def test_a_p99_no_limit_reaches_says_remove_limit(bursty_url):
    """5.25 s observed, 100 ms asked: the model's own CPU-side p99 is far less
    than the 5.15 s it would have to lose, so no limit meets it."""
    import json

    url, first, _ = bursty_url
    result = _advise(url, "--json", "--latency-metric", METRIC, "--max-p99-ms", "100", "--workers", "2")
    assert result.exit_code == 0, result.stderr
    row = next(r for r in json.loads(result.stdout)["containers"] if r["pod"] == first)
    assert row["status"] == "remove limit", row
    assert "over --max-p99-ms 100: the rest of its latency is not CPU" in row["reason"]
