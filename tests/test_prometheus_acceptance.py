"""The live acceptance driver's own logic (throttlelab.acceptance.prometheus_live):
KRR's rule from a series, the table from a plan and its rounds, the refusals. The
acceptance itself is a real run (docs/prometheus.md, "Live acceptance")."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from throttlelab.acceptance import prometheus_live as live

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "prometheus_acceptance.py"


def test_percentiles_interpolate_as_numpys_default():
    # numpy.percentile([1, 2, 3, 4], 50) == 2.5; of 1..10, p95 sits 0.55 of
    # the way from the 9th value to the 10th.
    assert live.linear_percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert live.linear_percentile([float(x) for x in range(1, 11)], 95) == pytest.approx(9.55)
    assert live.linear_percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        live.linear_percentile([], 50)


def test_krr_takes_p95_and_p99_of_every_point_in_whole_millicores():
    # 1m..100m: p95 at rank 94.05 is 95.05m, p99 at 98.01 is 99.01m: rounded up.
    values = [i / 1000 for i in range(1, 101)]
    assert live.krr_limits(values) == {"points": 100, "request_m": 96, "limit_m": 100}
    # Never under KRR's smallest CPU value.
    assert live.krr_limits([0.0, 0.001]) == {"points": 2, "request_m": live.KRR_MIN_M, "limit_m": live.KRR_MIN_M}


def test_krrs_query_is_its_cpu_loader_on_a_cgroups_id():
    assert live.krr_query("/tl-accept35-nginx") == 'sum(irate(container_cpu_usage_seconds_total{id="/tl-accept35-nginx"}[5m])) by (id, job)'


def _plan(recommended: dict[str, int | None]) -> dict:
    rows = [
        {"id": "/" + live.PREFIX + name, "recommended_m": m, "status": "advice" if m else "remove limit", "reason": "",
         "usage_p50_m": 100, "usage_p95_m": 150, "usage_max_m": 190, "predicted_low": 0.0, "predicted_throttled": 0.04,
         "predicted_high": 0.04}
        for name, m in recommended.items()
    ]  # fmt: skip
    scraped = {w.name: {"throttled_ratio": 0.5, "usage_cpus": 0.2} for w in live.WORKLOADS}
    krr = {"/" + live.PREFIX + w.name: {"points": 40, "request_m": 150, "limit_m": 180} for w in live.WORKLOADS}
    return {"max_throttled": 0.05, "advise_command": "throttlelab advise ...", "scraped": scraped, "advise": {"containers": rows}, "krr": krr}


def _round(ours: dict[str, float], krr: float, limits: dict[str, int]) -> dict:
    return {"sides": {
        "throttlelab": {n: {"limit_m": limits[n], "throttled_ratio": r, "usage_cpus": 0.2} for n, r in ours.items()},
        "krr": {w.name: {"limit_m": 180, "throttled_ratio": krr, "usage_cpus": 0.2} for w in live.WORKLOADS},
    }}  # fmt: skip


def test_the_table_holds_the_mean_over_rounds_against_target_plus_three_points():
    names = [w.name for w in live.WORKLOADS]
    recommended = dict(zip(names, (300, 400, 500, 600, None)))
    plan = _plan(recommended)
    # nginx: mean 7.67 % <= 8 %: met. pgbench: mean 9 %: missed. rt-app: advise said
    # "remove limit": no limit to judge.
    per_round = [
        {"nginx": 0.06, "pgbench": 0.08, "stress-ng": 0.0, "sysbench": 0.0, "rt-app": 0.0},
        {"nginx": 0.08, "pgbench": 0.09, "stress-ng": 0.0, "sysbench": 0.0, "rt-app": 0.0},
        {"nginx": 0.09, "pgbench": 0.10, "stress-ng": 0.0, "sysbench": 0.0, "rt-app": 0.0},
    ]
    doc = live.table(plan, [_round(r, 0.5, live.applied(plan)["throttlelab"]) for r in per_round])
    rows = {r["workload"]: r for r in doc["rows"]}
    assert rows["nginx"]["throttlelab"]["mean"] == pytest.approx(0.07666, abs=1e-4)
    assert [rows[n]["meets_target"] for n in names] == [True, False, True, True, None]
    assert rows["nginx"]["throttlelab"]["limit_m"] == 300 and rows["nginx"]["krr"]["limit_m"] == 180
    assert rows["rt-app"]["throttlelab"]["limit_m"] is None
    md = live.markdown(doc)
    assert "| nginx | 250m | 100m / 150m / 190m | 50.0 % | 300m | 4.0 % (0.0 %-4.0 %) | 7.7 % [6.0, 8.0, 9.0] | yes | 150m | 180m | 50.0 % [50.0, 50.0, 50.0] |" in md
    assert "| pgbench |" in md and "**no**" in md
    assert f"remove limit (run at {live.NO_LIMIT_M}m)" in md


def test_a_refused_row_keeps_its_first_limit_and_remove_limit_runs_at_the_nodes_cpus():
    plan = _plan({w.name: 300 for w in live.WORKLOADS})
    rows = plan["advise"]["containers"]
    rows[0].update(recommended_m=None, status="refused")
    rows[1].update(recommended_m=None, status="remove limit")
    ours = live.applied(plan)["throttlelab"]
    assert (ours["nginx"], ours["pgbench"], ours["stress-ng"]) == (live.WORKLOADS[0].limit_m, live.NO_LIMIT_M, 300)


def test_limits_take_advise_s_recommendation_and_krr_s_p99():
    plan = _plan({w.name: 100 * (i + 1) for i, w in enumerate(live.WORKLOADS)})
    sides = live.limits(plan)
    assert sides["throttlelab"] == {w.name: 100 * (i + 1) for i, w in enumerate(live.WORKLOADS)}
    assert set(sides["krr"].values()) == {180}


def test_cpu_stat_between_two_readings():
    before = {"nr_periods": 100, "nr_throttled": 10, "throttled_usec": 500_000, "usage_usec": 1_000_000}
    after = {"nr_periods": 300, "nr_throttled": 60, "throttled_usec": 2_000_000, "usage_usec": 3_000_000}
    w = live.throttled_window(before, after, 10.0)
    assert (w["nr_periods"], w["nr_throttled"], w["throttled_ratio"], w["usage_cpus"]) == (200, 50, 0.25, 0.2)
    assert w["throttled_s"] == 1.5
    assert live.throttled_window(before, before, 10.0)["throttled_ratio"] == 0.0


@pytest.mark.parametrize(
    "args, message",
    [
        (["table"], "plan.json: no plan (run the scrape step first)"),
        (["apply", "--round", "1"], "plan.json: no plan (run the scrape step first)"),
        (["scrape", "--minutes", "1"], "--minutes: at least 1.5"),
        (["apply", "--round", "1,x"], "--round '1,x': expected round numbers"),
        (["apply", "--round", "1", "--only", "rt-app,redis"], "--only 'redis': not one of"),
        (["scrape", "--only", "redis"], "--only 'redis': not one of"),
        (["advise"], "no plan.json and samples.json (run the scrape step first)"),
    ],
)
def test_the_steps_refuse_in_one_line(tmp_path, args, message):
    proc = subprocess.run([sys.executable, str(SCRIPT), args[0], "-o", str(tmp_path), *args[1:]], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("prometheus_acceptance: error: ") and message in lines[0], proc.stderr


def test_table_without_rounds_refuses(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps(_plan({w.name: 100 for w in live.WORKLOADS})))
    proc = subprocess.run([sys.executable, str(SCRIPT), "table", "-o", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "no round-K.json" in proc.stderr


def test_a_round_of_some_workloads_makes_a_table_of_those(tmp_path):
    """`apply --only rt-app,stress-ng`: the table holds the rows the rounds ran."""
    plan = _plan({w.name: 300 for w in live.WORKLOADS})
    ours = {"rt-app": 0.02, "stress-ng": 0.01}
    rounds = [_round(ours, 0.5, live.applied(plan)["throttlelab"]) for _ in range(3)]
    doc = live.table(plan, rounds)
    assert [r["workload"] for r in doc["rows"]] == ["stress-ng", "rt-app"]
    assert doc["rows"][1]["throttlelab"]["mean"] == pytest.approx(0.02)


def test_apply_without_advise_rows_refuses(tmp_path):
    plan = _plan({w.name: 100 for w in live.WORKLOADS})
    del plan["advise"]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    proc = subprocess.run([sys.executable, str(SCRIPT), "apply", "-o", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "no advise rows (run the advise step first)" in proc.stderr, proc.stderr


def test_the_advise_step_runs_advise_on_the_stored_samples(tmp_path):
    """samples.json (raw samples, as the scrape step stores them) served as
    Prometheus answers them: advise's rows land in plan.json."""
    from throttlelab.prometheus import PERIOD, PERIODS, QUOTA, THREADS, THROTTLED_PERIODS, THROTTLED_SECONDS, USAGE

    cid = "/" + live.PREFIX + "stress-ng"
    end_s, n = 1_800_000_600, 21
    values = {USAGE: 0.19, PERIODS: 10, THROTTLED_PERIODS: 5, THROTTLED_SECONDS: 0.3}
    series = [
        {"metric": {"__name__": name, "id": cid}, "samples": [[end_s - 600 + 30 * i, rate * 30 * i] for i in range(n)]}
        for name, rate in values.items()
    ] + [
        {"metric": {"__name__": name, "id": cid}, "samples": [[end_s - 600 + 30 * i, v] for i in range(n)]}
        for name, v in ((QUOTA, 20_000), (PERIOD, 100_000), (THREADS, 2))
    ]  # fmt: skip
    (tmp_path / "samples.json").write_text(json.dumps({"series": series}))
    (tmp_path / "plan.json").write_text(json.dumps({"minutes": 10, "step": "30s", "end_s": end_s, "scraped": {}, "krr": {}}))
    proc = subprocess.run([sys.executable, str(SCRIPT), "advise", "-o", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    (row,) = plan["advise"]["containers"]
    assert (row["id"], row["limit_m"], row["windows"]) == (cid, 200, 20)
    assert plan["advise_command"].startswith("throttlelab advise --prometheus URL --selector")
