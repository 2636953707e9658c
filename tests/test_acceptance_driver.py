"""The acceptance driver's judgement (scripts/acceptance.py): how a row's
kernel runs are pooled and held against the simulator's seeds. The runs
themselves need real programs and an idle host, so they are not tests."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "acceptance.py"


@pytest.fixture(scope="module")
def acceptance():
    spec = importlib.util.spec_from_file_location("acceptance", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["acceptance"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["acceptance"]


def test_percentiles_are_nearest_rank(acceptance):
    values = [float(x) for x in range(1, 101)]
    assert (acceptance.percentile(values, 50), acceptance.percentile(values, 99)) == (50.0, 99.0)
    assert acceptance.percentile([], 99) == 0.0


def test_a_rows_percentiles_pool_its_runs_requests(acceptance):
    # Two slow requests in one run of two: that run's own p99 is 100 ms, the
    # other's 1 (their mean 50.5); of the 200 requests together the p99 is
    # the 198th, 1 ms; three slow ones would make it 100.
    fast = [1.0] * 100
    two_slow = [1.0] * 98 + [100.0] * 2
    three_slow = [1.0] * 97 + [100.0] * 3
    assert acceptance.pooled_percentiles([two_slow, fast]) == {"p50_ms": 1.0, "p99_ms": 1.0}
    assert acceptance.pooled_percentiles([three_slow, fast]) == {"p50_ms": 1.0, "p99_ms": 100.0}
    assert acceptance.pooled_percentiles([[]]) == {}


def test_a_replays_percentiles_pool_its_processes_requests(acceptance):
    # Four server processes of 25 requests each, one slow request (9 ms) in
    # each of three: each process's own p99 is its slowest, so their mean
    # would be 6 ms; of the 100 requests the p99 is the 99th, 9 ms.
    def process(slow_us):
        us = [1000] * (24 if slow_us else 25) + ([slow_us] if slow_us else [])
        return {"latencies_us": {"from_arrival": us, "from_start": [500] * 25}}

    tasks = [process(9000), process(9000), process(9000), process(None)]
    got = acceptance.request_percentiles(tasks, (50, 99))
    assert (got["p50_ms"], got["p99_ms"], len(got["latencies_ms"])) == (1.0, 9.0, 100)
    assert acceptance.request_percentiles(tasks, (99,), "from_start")["p99_ms"] == 0.5
    assert acceptance.request_percentiles([], (99,)) == {}


def test_the_verdicts_hold_the_issues_targets(acceptance):
    kernel = [{"throttled_pct": t, "usage_cpus": 0.25} for t in (14.0, 16.0)]
    pooled = {"p99_ms": 40.0}

    def verdict(throttled_pct, usage_cpus, p99_ms=None):
        sim = {"throttled_pct": throttled_pct, "usage_cpus": usage_cpus}
        return acceptance.verdicts(kernel, pooled, [sim], {"p99_ms": p99_ms} if p99_ms else {})

    # Inside the kernel's range [14, 16], or within 3 points of its mean (15).
    assert verdict(15.9, 0.25)["throttled"] and verdict(17.9, 0.25)["throttled"]
    assert not verdict(18.1, 0.25)["throttled"] and not verdict(11.9, 0.25)["throttled"]
    # Usage within 5 %, the seeds' pooled p99 within 25 % of the runs', no p99 without one.
    assert verdict(15, 0.26)["usage"] and not verdict(15, 0.27)["usage"]
    assert verdict(15, 0.25, 49.0)["p99"] and not verdict(15, 0.25, 51.0)["p99"]
    assert verdict(15, 0.25)["p99"] is None


def test_sysbench_histograms_become_every_requests_latency(acceptance):
    out = (
        "    events per second:    45.20\n"
        "Latency histogram (values are in milliseconds)\n"
        "       value  ------------- distribution ------------- count\n"
        "       5.570 |****************************************  3\n"
        "       5.670 |*************                            1\n"
        "      10.650 |*                                        1\n"
    )
    figures = acceptance.Sysbench.parse(out)
    assert figures["events_per_s"] == 45.2
    assert figures["latencies_ms"] == [5.57, 5.57, 5.57, 5.67, 10.65]
    assert (figures["p50_ms"], figures["p99_ms"]) == (5.57, 10.65)


def test_a_row_holds_the_pooled_seeds_against_the_pooled_runs(acceptance):
    # The captured row's kernel p50 (3 ms) less its replay's (2 ms, pooled
    # over both seeds) is the latency outside the replay, 1 ms, added to
    # every predicted percentile; the seeds' requests are pooled, not kept.
    class Server:
        name = "server"

    captured = acceptance.Config("captured", 100_000, 50_000, 0, None)
    tighter = acceptance.Config("tighter quota", 100_000, 25_000, 0, None)
    seed = lambda ms: {"throttled_pct": 10.0, "usage_cpus": 0.3, "latencies_ms": ms}  # noqa: E731
    sims = {"captured": [seed([2.0] * 99 + [9.0]), seed([2.0] * 100)], "tighter quota": [seed([2.0] * 90 + [30.0] * 10) for _ in range(2)]}
    runs = {"captured": [{"throttled_pct": 10.0, "usage_cpus": 0.3, "p50_ms": 3.0}], "tighter quota": [{"throttled_pct": 11.0, "usage_cpus": 0.3}]}
    pooled = {"captured": {"p50_ms": 3.0, "p99_ms": 3.5}, "tighter quota": {"p50_ms": 3.0, "p99_ms": 30.0}}
    rows = acceptance.judged(Server(), [captured, tighter], runs, pooled, sims, {"capture": {}})
    assert [r["latency_outside_ms"] for r in rows] == [1.0, 1.0]
    assert rows[0]["sim_pooled"] == {"p50_ms": 3.0, "p99_ms": 3.0}
    assert rows[1]["sim_pooled"] == {"p50_ms": 3.0, "p99_ms": 31.0}
    assert rows[1]["verdict"] == {"throttled": True, "usage": True, "p99": True}
    assert all("latencies_ms" not in s for r in rows for s in r["sim"])


def test_rejudge_makes_a_runs_predictions_again_from_its_captures(acceptance, tmp_path):
    # A kept capture of four run/sleep workers (2 CPUs, 0.6 CPUs of demand)
    # and a finished run of two rows: its captured limit (120 ms a 100 ms
    # period) and 70 ms. The predictions come back the same each time, and
    # the smaller quota throttles more.
    from throttlelab.terminal import Terminal

    (tmp_path / "acceptance-captures").mkdir()
    (tmp_path / "acceptance-captures" / "stress-ng.toml").write_text(
        'name = "capture"\nduration_s = 4\n[machine]\ncpus = 2\n[[cgroup]]\nname = "cap"\nperiod_us = 100000\nquota_us = 120000\n'
        '[[task]]\nname = "stress-ng-cpu"\ncgroup = "cap"\nthreads = 4\nstart_spread_us = 190000\n'
        "phases = [{ run_us = 29000 }, { sleep_us = 163000 }]\n"
    )
    captured = acceptance.Config("captured", 100_000, 120_000, 0, 4)
    tighter = acceptance.Config("tighter quota", 100_000, 70_000, 0, 4)
    row = lambda config: {  # noqa: E731
        "program": "stress-ng", "config": config.name, "configuration": acceptance.asdict(config),
        "kernel": [{"throttled_pct": 0.0, "usage_cpus": 0.6}], "kernel_pooled": {}, "capture": {}, "demand": {},
    }
    doc = {"runs": 1, "seeds": 20, "duration_s": 2.0, "capture_s": 4.0, "rows": [row(captured), row(tighter)], "failed": {}}
    first = acceptance.rejudge(doc, tmp_path / "acceptance-captures", 3, Terminal())
    again = acceptance.rejudge(doc, tmp_path / "acceptance-captures", 3, Terminal())
    assert first["rows"] == again["rows"] and first["seeds"] == 3 and "rejudged" in first
    assert [len(r["sim"]) for r in first["rows"]] == [3, 3]
    throttled = [acceptance._mean([s["throttled_pct"] for s in r["sim"]]) for r in first["rows"]]
    assert throttled[1] > throttled[0], throttled


def test_rejudge_refuses_what_is_not_a_finished_run_in_one_line(acceptance, tmp_path):
    bad = tmp_path / "acceptance.json"
    for text in ("{", '{"rows": [{"config": "captured"}]}', "[]"):
        bad.write_text(text)
        with pytest.raises(ValueError, match="not a finished run's acceptance.json"):
            acceptance.finished_run(bad)
    bad.write_text('{"rows": [{"program": "stress-ng"}]}')
    with pytest.raises(ValueError, match="no capture of stress-ng in .*acceptance-captures"):
        acceptance.finished_run(bad)
    (tmp_path / "acceptance-captures").mkdir()
    (tmp_path / "acceptance-captures" / "stress-ng.toml").write_text("")
    assert acceptance.finished_run(bad)["rows"] == [{"program": "stress-ng"}]
