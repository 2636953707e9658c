"""advise --prometheus on fixture data: the windows read from cAdvisor's
counters (resets, gaps), the fit, the search, the rows, and one-line errors."""

from __future__ import annotations

import csv
import io
import json

import pytest

from helpers import cli, free_port
from throttlelab.prometheus import (
    PERIODS, QUOTA, THROTTLED_PERIODS, USAGE, PrometheusError, containers, matchers, steps, workload,
)
from throttlelab.prometheus_fixture import Fixture, serve
from throttlelab.prometheus_fleet import START_S, fixture, members
from throttlelab.prometheus_model import Fit
from throttlelab.runner import Runner

STEP_S = 60
WINDOWS = 8


@pytest.fixture(scope="module")
def fleet_doc():
    """12 synthetic containers, 8 one-minute windows each (every shape drawn)."""
    with Runner(workers=2) as runner:
        return fixture(members(12, WINDOWS, seed=3), STEP_S, runner)


@pytest.fixture(scope="module")
def fleet_url(fleet_doc):
    server, url = serve(Fixture(fleet_doc))
    yield url
    server.shutdown()


def _advise(url: str, *args: str):
    end = str(START_S + WINDOWS * STEP_S)
    return cli("advise", "--prometheus", url, "--range", f"{WINDOWS}m", "--step", "1m", "--end", end, "--max-throttled", "0.05", *args)


def test_fleet_rows_say_no_limit_refuse_in_words_or_recommend(fleet_doc, fleet_url):
    result = _advise(fleet_url, "--json", "--workers", "2")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    rows = {r["id"]: r for r in doc["containers"]}
    truth = {t["id"]: t for t in fleet_doc["truth"]}
    assert set(rows) == set(truth)
    shapes = {t["shape"] for t in truth.values()}
    assert {"unlimited", "idle", "bursty"} <= shapes, shapes  # the draw covers what is checked below
    for id_, row in rows.items():
        shape = truth[id_]["shape"]
        if shape == "unlimited":
            assert row["status"] == "no limit" and row["limit_m"] is None
        elif shape == "idle":
            assert row["status"] == "refused" and "never throttled and never near its limit" in row["reason"]
        if row["status"] == "advice":
            assert row["predicted_low"] <= row["predicted_throttled"] == row["predicted_high"] <= 0.05
            # A container throttled well above the target now needs more than its limit.
            if row["throttled_now"] > 0.15:
                assert row["recommended_m"] > row["limit_m"], row
    bursty = [r for i, r in rows.items() if truth[i]["shape"] == "bursty"]
    assert any(r["status"] == "advice" for r in bursty), bursty
    # Every node's machine_cpu_cores is scraped: no row simulated on an assumed count.
    assert not any("machine_cpu_cores" in r["reason"] for r in rows.values())
    assert all(r["workload"].startswith(("Deployment/", "StatefulSet/")) for r in rows.values())


def test_the_fit_keeps_the_burst_length_that_made_the_counters(fleet_doc, fleet_url):
    """The fleet's counters were simulated from a hidden model: among the models
    the fit keeps is the one that produced them (where one is kept at all)."""
    fixture_ = Fixture(fleet_doc)
    at = steps(START_S + WINDOWS * STEP_S, WINDOWS * STEP_S, STEP_S)
    found = containers(lambda q: fixture_.query_range(q, at[0], at[-1], STEP_S), "", at)
    truth = {t["id"]: t for t in fleet_doc["truth"]}
    fits = [Fit(c) for c in found if c.limited and truth[c.labels["id"]]["shape"] == "bursty"]
    assert fits
    with Runner(workers=2) as runner:
        for fit in fits:
            fit.take(runner.run_many(fit.runs()))
            t = truth[fit.container.labels["id"]]
            # Simulated on its node's machine_cpu_cores (joined by the node label), throttled seconds fitted.
            assert fit.cpus == t["node_cpus"] and fit.fits_seconds, (t, fit.cpus)
            kept = {(m.burst_us, m.threads) for m in fit.consistent_models}
            assert (t["burst_us"], t["threads"]) in kept, (t, kept)
            # ... and the data tell bursts apart: not every length is consistent.
            assert len(kept) < len(fit.models)


def test_each_row_says_which_command_captures_it(fleet_doc, fleet_url):
    """cAdvisor's id is the container's cgroup path: the row's capture command
    finds the same container (its pod's UID and its id) on the node."""
    from throttlelab.kubelet_cgroups import parse

    rows = json.loads(_advise(fleet_url, "--json", "--workers", "2").stdout)["containers"]
    assert len(rows) == 12
    for r in rows:
        uid, cid = parse(r["id"])
        assert r["id"] == f"/kubepods/burstable/pod{uid}/{cid}"
        assert r["capture"] == f"throttlelab capture --container-id {cid} -o {cid[:12]}.toml"
    table = _advise(fleet_url, "--workers", "2")
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    start = lines.index("To capture a container, on its node (then --capture NAME=FILE, NAME its namespace/pod/container or id):")
    # One line per row, by its name, with the id's first 12 digits.
    for r in rows:
        cid = parse(r["id"])[1]
        assert f"  {r['pod']}/{r['container']}: throttlelab capture --container-id {cid[:12]} -o {cid[:12]}.toml" in lines[start + 1 :]
    assert len(lines) == start + 1 + len(rows)


def test_csv_and_patch(fleet_url, tmp_path):
    patch = tmp_path / "limits.yaml"
    result = _advise(fleet_url, "--csv", "--patch", str(patch), "--workers", "2")
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    advised = [r for r in rows if r["recommended_m"]]
    assert advised and all(r["capture"].startswith("throttlelab capture --container-id ") for r in rows)
    text = patch.read_text()
    for r in advised:
        if r["workload"].startswith("Deployment/"):
            name = r["workload"].split("/", 1)[1]
            assert f"kind: Deployment\nmetadata:\n  name: {name}\n  namespace: {r['namespace']}\n" in text
    assert "        - name: app\n          resources:\n            limits:\n              cpu: " in text


def _series(name: str, points, **labels):
    return {"metric": {"__name__": name, "id": "/c", **labels}, "samples": points}


def test_counter_resets_and_gaps_are_windows_not_errors(monkeypatch):
    # Usage +0.5 s a minute, reset to 0 after t=120 (a restart), no sample at t=240.
    ts = [0, 60, 120, 180, 300, 360]
    usage = [10, 10.5, 11, 0.5, 1.5, 2.0]
    doc = {"series": [
        _series(USAGE, list(zip(ts, usage)), cpu="total"),
        _series(PERIODS, list(zip(ts, [0, 600, 1200, 600, 1800, 2400]))),
        _series(THROTTLED_PERIODS, list(zip(ts, [0, 60, 120, 60, 180, 240]))),
        _series(QUOTA, [[t, 50000] for t in ts]),
    ]}
    f = Fixture(doc)
    at = [0.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0]
    # Prometheus' 5-minute lookback would fill t=240 from t=180: a short one shows the gap.
    monkeypatch.setattr("throttlelab.prometheus_fixture.LOOKBACK_S", 30.0)
    [c] = containers(lambda q: f.query_range(q, 0, 360, 60), "", at)
    assert c.resets == 1 and c.gaps == 1
    assert [round(w.usage_s, 6) for w in c.windows] == [0.5, 0.5, 0.5, 0.5]
    assert [w.start_s for w in c.windows] == [0, 60, 120, 300]
    assert all(w.throttled_ratio == pytest.approx(0.1) for w in c.windows)


def test_workloads_from_pod_names_and_kubepods_ids():
    assert workload({"pod": "web-7d9f8c6b5d-x2k4p"}) == ("Deployment", "web")
    assert workload({"pod": "db-2"}) == ("StatefulSet", "db")
    assert workload({"pod": "standalone"}) == ("Pod", "standalone")
    cid = "0" * 64
    assert workload({"id": f"/kubepods/burstable/pod12345678-1234-1234-1234-123456789abc/{cid}"}) == (
        "Pod", "12345678-1234-1234-1234-123456789abc")
    assert workload({"id": f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12345678_1234_1234_1234_123456789abc.slice/cri-containerd-{cid}.scope"}) == (
        "Pod", "12345678-1234-1234-1234-123456789abc")
    assert workload({"id": f"/kubepods/pod12345678-1234-1234-1234-123456789abc/crio-{cid}"}) == (
        "Pod", "12345678-1234-1234-1234-123456789abc")
    assert workload({"id": "/my-group"}) == ("cgroup", "/my-group")


def test_selector_matchers():
    assert matchers('namespace="shop", pod=~"web-.*"') == [("namespace", "=", "shop"), ("pod", "=~", "web-.*")]
    assert matchers('{container!="POD"}') == [("container", "!=", "POD")]
    assert matchers("") == []
    with pytest.raises(PrometheusError, match="--selector"):
        matchers("namespace=shop")


def test_too_few_windows_refuses_that_row_in_words(fleet_url):
    result = cli("advise", "--prometheus", fleet_url, "--range", "2m", "--step", "1m", "--end", str(START_S + 2 * STEP_S),
                 "--max-throttled", "5%", "--json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)["containers"]
    limited = [r for r in rows if r["limit_m"] is not None]
    assert limited and all(r["status"] == "refused" and "too few windows (2, needs 3)" in r["reason"] for r in limited)


@pytest.mark.parametrize(
    "args, message",
    [
        (("--selector", 'namespace="nowhere"'), "matches no container"),
        (("--selector", "namespace=shop"), "--selector 'namespace=shop': expected label matchers"),
        (("--range", "7 days"), "--range '7 days' is not a duration"),
        (("--step", "1.5s"), "--step must be whole seconds"),
        (("--max-p99-ms", "50"), "--max-p99-ms with --prometheus needs --latency-metric NAME"),
        (("--json", "--csv"), "--json and --csv: choose one"),
        (("--platform", "docker", "--patch", "x.yaml"), "--patch writes Kubernetes resources"),
        (("--capture", "nobody"), "--capture 'nobody': expected NAME=FILE"),
        (("--end", "yesterday"), "--end 'yesterday' is not unix seconds"),
        (("--cgroup", "app"), "give no SCENARIO and no --cgroup"),
    ],
)
def test_bad_input_is_one_line_exit_2(fleet_url, args, message):
    result = _advise(fleet_url, *args)
    assert result.exit_code == 2, result.stdout
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_an_unreachable_server_or_not_a_url_is_one_line_exit_2(fleet_url):
    result = _advise(f"http://127.0.0.1:{free_port()}")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "cannot reach Prometheus at http://127.0.0.1:" in result.stderr
    result = _advise(f"{fleet_url}/not-prometheus")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert f"Prometheus at {fleet_url}/not-prometheus refused container_cpu_usage_seconds_total{{}}: HTTP Status Code 404" in result.stderr
    result = _advise("localhost:9090")
    assert result.exit_code == 2 and "is not a URL such as http://127.0.0.1:9090" in result.stderr
    result = cli("advise", "--max-throttled", "0.05")
    assert result.exit_code == 2 and "needs SCENARIO (or --prometheus URL)" in result.stderr


def test_local_and_ray_give_identical_rows(fleet_url):
    pytest.importorskip("ray")
    local = _advise(fleet_url, "--json", "--workers", "2")
    ray_ = _advise(fleet_url, "--json", "--executor", "ray", "--workers", "2")
    assert local.exit_code == 0 and ray_.exit_code == 0, ray_.stderr
    assert json.loads(local.stdout)["containers"] == json.loads(ray_.stdout)["containers"]


def test_report_prometheus_draws_the_fleet(fleet_url, tmp_path):
    end = str(START_S + WINDOWS * STEP_S)
    args = ("--prometheus", fleet_url, "--range", f"{WINDOWS}m", "--step", "1m", "--end", end, "--workers", "2")
    result = cli("report", *args, "-o", str(tmp_path / "r"))
    assert result.exit_code == 0, result.stderr
    page = (tmp_path / "r" / "index.html").read_text()
    assert page.count("<tr>") == 13  # the header and the 12 containers
    assert page.count("<img ") >= 1 and "consistent models predict" in page
    assert "no limit" in page
    bad = cli("report", "two-spinners", *args, "-o", str(tmp_path / "s"))
    assert bad.exit_code == 2 and "give no TARGET, --set or --window-ms" in bad.stderr and bad.stderr.count("\n") == 1


def test_a_capture_replaces_the_model_for_its_row(fleet_doc, fleet_url, tmp_path):
    from helpers import scenario_text

    capture = tmp_path / "capture.toml"
    capture.write_text(scenario_text(period_us="100000", quota_us="50000", threads="1", phases="[{ run_us = 30000 }, { sleep_us = 70000 }]"))
    id_ = next(t["id"] for t in fleet_doc["truth"] if t["shape"] == "bursty")
    result = _advise(fleet_url, "--json", "--workers", "2", "--capture", f"{id_}={capture}")
    assert result.exit_code == 0, result.stderr
    rows = {r["id"]: r for r in json.loads(result.stdout)["containers"]}
    row = rows[id_]
    assert row["models"] == "capture" and "from its capture" in row["reason"]
    # advise on the capture: 30 ms of every 100 ms on one thread needs at least 300m.
    assert 300 <= row["recommended_m"] <= 400
    assert all(r["models"] != "capture" for i, r in rows.items() if i != id_)
    bad = _advise(fleet_url, "--capture", f"/nowhere={capture}")
    assert bad.exit_code == 2 and "--capture /nowhere: no container of that name or id" in bad.stderr


def test_other_platforms_answer_in_their_units(fleet_url):
    result = _advise(fleet_url, "--platform", "cgroup")
    assert result.exit_code == 0, result.stderr
    assert "cpu.max " in result.stdout
