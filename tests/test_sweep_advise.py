"""sweep (rows, order, CSV, executors, errors) and advise (advice that holds on fresh
seeds, close to the brute-force optimum; "remove the limit" when nothing can meet)."""

from __future__ import annotations

import csv
import json
import socket
import sys
import textwrap

import pytest

import throttlelab
from helpers import cli, write_capture
from throttlelab import _native
from rich.console import Console
from throttlelab.advise import render as render_advice
from throttlelab.captured import cgroup_version
from throttlelab.platforms import PLATFORMS, for_cgroup

#: request-service over 6 variants.
GRID = {"cgroup.app.quota_us": [60000, 100000, 140000], "cgroup.app.period_us": [50000, 100000]}


@pytest.fixture
def ray_instance():
    """Shut down the local Ray instance a test started."""
    yield
    import ray

    ray.shutdown()


def test_sweep_rows_identical_under_local_and_ray(ray_instance):
    local = throttlelab.sweep("request-service", GRID)
    on_ray = throttlelab.sweep("request-service", GRID, executor="ray", workers=2)
    assert len(local) == 6
    assert local.to_dict("records") == on_ray.to_dict("records")


def test_sweep_rows_in_grid_order_match_plain_runs():
    result = cli(
        "sweep", "request-service", "--grid", "cgroup.app.quota_us=60000,100_000", "--grid", "seed=1,2",
        "--set", "duration_s=10", "--json",
    )
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["cgroup.app.quota_us"], r["seed"]) for r in rows] == [(60000, 1), (60000, 2), (100000, 1), (100000, 2)]
    for row in rows:
        out = throttlelab.run("request-service", set=["duration_s=10", f"cgroup.app.quota_us={row['cgroup.app.quota_us']}", f"seed={row['seed']}"])
        assert row["cgroup.app.nr_throttled"] == out["cgroups"]["app"]["nr_throttled"]
        assert row["task.web.latency_p99_us"] == out["tasks"]["web"]["latency_us"]["p99"]
        assert row["task.web.service_latency_p99_us"] == out["tasks"]["web"]["service_latency_us"]["p99"]
        assert row["task.web.requests"] == out["tasks"]["web"]["requests"]
    assert not any("wall" in key or "engine" in key for key in rows[0])


def test_sweep_csv_holds_the_json_rows(tmp_path):
    args = ("sweep", "two-spinners", "--grid", "cgroup.app.quota_us=10000,20000", "--grid", "kernel.profile=5.4,6.18")
    rows = json.loads(cli(*args, "--json").stdout)
    path = tmp_path / "rows.csv"
    result = cli(*args, "-o", str(path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"wrote {path}: 4 rows"
    with open(path, newline="") as f:
        read = list(csv.DictReader(f))
    assert [list(r) for r in read] == [list(r) for r in rows]
    assert [r["cgroup.app.throttled_usec"] for r in read] == [str(r["cgroup.app.throttled_usec"]) for r in rows]
    assert [r["kernel.profile"] for r in read] == ["5.4", "6.18", "5.4", "6.18"]


@pytest.mark.parametrize(
    "grid, message",
    [
        ("cgroup.app.quota_us", "expected KEY=V1,V2,..."),
        ("cgroup.app.quota_us=1000,,2000", "expected KEY=V1,V2,..."),
        ("=1,2", "expected KEY=V1,V2,..."),
        ("cgroup.app.quotax=1000,2000", "cgroup.app.quotax: unknown field"),
        ("cgroup.app.quota_us=20000,500", "cgroup.app.quota_us: must be >= 1000"),
        # A text key's value stays the text it reads as, as for --set: not the number 5.1.
        ("kernel.profile=5.4,5.10", 'kernel.profile: unknown profile "5.10"'),
    ],
)
def test_sweep_bad_grid_is_one_line_exit_2(grid, message):
    result = cli("sweep", "two-spinners", "--grid", grid)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("throttlelab: error: ")
    assert message in result.stderr


def test_sweep_ray_missing_is_one_line_exit_2(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    result = cli("sweep", "two-spinners", "--grid", "seed=1,2", "--executor", "ray")
    assert result.exit_code == 2
    assert result.stderr == "throttlelab: error: the ray executor needs Ray: pip install '.[ray]'\n"


def test_sweep_unreachable_ray_cluster_is_one_line_exit_2():
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        result = cli("sweep", "two-spinners", "--grid", "seed=1,2", "--executor", "ray", "--address", address)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"throttlelab: error: cannot reach the Ray cluster at {address}: ")
    assert result.stderr.count("\n") == 1


TARGET = dict(max_throttled=0.05, max_p99_ms=100.0)


def _worst(quota_us: int, period_us: int, burst_us: int, seeds) -> tuple[float, float]:
    """Worst throttled ratio and p99 (ms) of request-service's app over ``seeds``."""
    ratio, p99 = 0.0, 0.0
    for seed in seeds:
        sets = [f"cgroup.app.quota_us={quota_us}", f"cgroup.app.period_us={period_us}", f"cgroup.app.burst_us={burst_us}", f"seed={seed}"]
        out = json.loads(_native.run(throttlelab.scenario_text("request-service"), sets))
        ratio = max(ratio, out["cgroups"]["app"]["throttled_ratio"])
        p99 = max(p99, out["tasks"]["web"]["latency_us"]["p99"] / 1e3)
    return ratio, p99


def _meets(worst: tuple[float, float]) -> bool:
    return worst[0] <= TARGET["max_throttled"] and worst[1] <= TARGET["max_p99_ms"]


def test_advise_holds_on_fresh_seeds_and_is_near_the_brute_force_optimum():
    result = throttlelab.advise("request-service", "app", **TARGET)
    rec = result["recommendation"]
    assert rec and not result["remove_limit"]
    assert _meets(_worst(rec["quota_us"], rec["period_us"], rec["burst_us"], (11, 12, 13)))

    # The smallest quota in 1 ms steps that meets the target in the same seeds, at the
    # same period and burst fraction.
    chosen = next(c for c in result["candidates"] if c["quota_us"] == rec["from_quota_us"] and c["period_us"] == rec["period_us"])
    fraction = chosen["burst_fraction"]
    smallest = next(
        q for q in range(1000, rec["quota_us"] + 1, 1000)
        if _meets(_worst(q, rec["period_us"], int(fraction * q) // 100 * 100, (1, 2, 3)))
    )
    assert abs(rec["quota_us"] - smallest) <= 0.25 * smallest


def test_advise_says_remove_the_limit_and_exits_1_when_the_target_is_impossible():
    args = ("advise", "request-service", "--cgroup", "app", "--max-throttled", "0.05", "--max-p99-ms", "10", "--runs", "1")
    result = cli(*args)
    assert result.exit_code == 1, result.stderr
    assert result.stdout.startswith("Remove the limit and relax the target")
    assert "echo max > cpu.max" in result.stdout and "no limit" in result.stdout
    doc = json.loads(cli(*args, "--json").stdout)
    assert doc["remove_limit"] and doc["recommendation"] is None and not doc["met"]
    assert not any(c["meets"] for c in doc["candidates"])


def test_advise_for_kubernetes_searches_millicores_at_the_kubelet_period():
    args = ("advise", "request-service", "--cgroup", "app", "--max-throttled", "5%", "--platform", "kubernetes", "--runs", "2")
    doc = json.loads(cli(*args, "--json").stdout)
    assert doc["platform"] == "kubernetes" and doc["target"]["max_throttled"] == 0.05
    assert {c["period_us"] for c in doc["candidates"]} == {100_000}
    assert all(c["burst_us"] == 0 for c in doc["candidates"])
    rec = doc["recommendation"]
    millicores = rec["quota_us"] // 100
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"Set limits.cpu {millicores}m")
    # The row marked recommended is the same limit, its margin a column of its own.
    row = next(line for line in result.stdout.splitlines() if "recommended" in line)
    assert " ".join(row.split()).startswith(f"limits.cpu {millicores}m {millicores / 1000:.2f} +10 % "), row
    assert f"resources:\n    limits:\n      cpu: {millicores}m" in result.stdout
    # The scenario's own limit comes first, as the kernel would run it: 500m, throttled.
    current = doc["current"]
    assert (current["quota_us"], current["period_us"]) == (50_000, 100_000) and not current["meets"]
    assert "current: limits.cpu 500m" in result.stdout


def test_advise_says_remove_the_limit_when_only_the_whole_machine_meets_it():
    # Two spinners on 2 CPUs: nothing short of both CPUs per period keeps them unthrottled.
    doc = json.loads(cli("advise", "two-spinners", "--cgroup", "app", "--max-throttled", "0", "--runs", "1", "--json").stdout)
    rec = doc["recommendation"]
    assert rec is not None and rec["quota_us"] == 2 * rec["period_us"]
    assert doc["remove_limit"] and doc["met"]
    text = cli("advise", "two-spinners", "--cgroup", "app", "--max-throttled", "0", "--runs", "1").stdout
    assert text.startswith("Remove the limit: only every CPU of the machine")


@pytest.mark.parametrize(
    "platform, setting, snippet",
    [
        ("cgroup", "cpu.max 210700 200000, cpu.max.burst 52600",
         "# cgroup v2\necho '210700 200000' > cpu.max\necho 52600 > cpu.max.burst\n# cgroup v1 (the cpu hierarchy)\n"
         "echo 200000 > cpu.cfs_period_us\necho 210700 > cpu.cfs_quota_us\necho 52600 > cpu.cfs_burst_us"),
        ("kubernetes", "limits.cpu 1054m", "resources:\n  limits:\n    cpu: 1054m"),
        ("docker", "--cpu-period 200000 --cpu-quota 210700", "docker update --cpu-period 200000 --cpu-quota 210700 CONTAINER"),
        ("systemd", "CPUQuota=105.35% CPUQuotaPeriodSec=200ms", "# systemctl edit UNIT\n[Service]\nCPUQuota=105.35%\nCPUQuotaPeriodSec=200ms"),
    ],
)
def test_a_limit_in_each_platforms_units(platform, setting, snippet):
    where = PLATFORMS[platform]
    assert where.setting(210_700, 200_000, 52_600) == setting
    assert where.snippet(210_700, 200_000, 52_600 if where.burst else 0) == snippet


def test_a_cgroup_gets_the_files_of_its_version():
    v1, v2 = for_cgroup("cgroup", "v1"), for_cgroup("cgroup", "v2")
    assert v1.setting(194_500, 200_000, 0) == "cfs_quota_us 194500 cfs_period_us 200000"
    assert v1.setting(194_500, 200_000, 1000) == "cfs_quota_us 194500 cfs_period_us 200000, cfs_burst_us 1000"
    assert v1.snippet(194_500, 200_000, 0) == "echo 200000 > cpu.cfs_period_us\necho 194500 > cpu.cfs_quota_us"
    assert v1.snippet(None, 100_000, 0) == "echo -1 > cpu.cfs_quota_us"
    assert v2.snippet(194_500, 200_000, 0) == "echo '194500 200000' > cpu.max"
    assert v2.snippet(None, 100_000, 0) == "echo max > cpu.max"
    assert for_cgroup("kubernetes", "v1") == PLATFORMS["kubernetes"]
    # The version from where the cgroup is; none where no path is known.
    assert cgroup_version("/sys/fs/cgroup/cpu/throttlelab-x") == "v1"
    assert cgroup_version("/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1") == "v1"
    assert cgroup_version("/sys/fs/cgroup/system.slice/web.service") == "v2"
    assert cgroup_version("/sys/fs/cgroup/unified/app") == "v2"
    assert cgroup_version("/sys/fs/cgroup/cpu-heavy.slice") == "v2"
    for unknown in ("pids 12,13", "", None, "relative/cpu"):
        assert cgroup_version(unknown) is None


def _capture(tmp_path, source: str) -> str:
    """A capture at ``source`` in cgroup app, beside an unlimited cgroup."""
    return write_capture(tmp_path, source, usage_usec=400000, cgroups='[[cgroup]]\nname = "other"\n')


def test_advise_says_one_number_and_the_files_of_the_captured_cgroup(tmp_path):
    """The headline, the row marked recommended and the snippet are one limit;
    the margin is its own column; a v1 capture gets v1's files; the only
    limited cgroup is the one advised; what the kernel measured is a row."""
    path = _capture(tmp_path, "/sys/fs/cgroup/cpu/throttlelab-w")
    args = ("advise", path, "--max-throttled", "5%", "--runs", "2")
    doc = json.loads(cli(*args, "--json").stdout)
    assert doc["target"]["cgroup"] == "app" and doc["cgroup_version"] == "v1"
    assert doc["capture"]["throttled_ratio"] == 0.9 and doc["capture"]["usage_cpus"] == 0.2
    rec = doc["recommendation"]
    boundary = next(c for c in doc["candidates"] if c.get("holdout_meets"))
    assert rec["quota_us"] > boundary["quota_us"] and rec["from_quota_us"] == boundary["quota_us"]
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    v1 = for_cgroup("cgroup", "v1")
    setting = v1.setting(rec["quota_us"], rec["period_us"], rec["burst_us"])
    assert setting.startswith(f"cfs_quota_us {rec['quota_us']} cfs_period_us {rec['period_us']}")
    assert text.startswith(f"Set {setting} (")
    snippet = v1.snippet(rec["quota_us"], rec["period_us"], rec["burst_us"])
    assert snippet.startswith(f"echo {rec['period_us']} > cpu.cfs_period_us\necho {rec['quota_us']} > cpu.cfs_quota_us")
    assert textwrap.indent(snippet, "  ") in text
    assert "cpu.max" not in text, "a v1 cgroup has no cpu.max"
    # The table, wide enough that no cell wraps: one row recommended, the
    # same limit, its margin in a column; the boundary it came from; the capture.
    console = Console(width=250, record=True)
    for part in render_advice(doc):
        console.print(part)
    rows = [" ".join(line.split()) for line in console.export_text().splitlines()]
    recommended = [row for row in rows if "recommended" in row]
    assert recommended == [f"{setting} {rec['quota_us'] / rec['period_us']:.2f} +10 % "
                           f"{100 * rec['holdout']['throttled_ratio']:.1f} yes yes: recommended"], rows
    boundary_setting = v1.setting(boundary["quota_us"], boundary["period_us"], boundary["burst_us"])
    assert any(row.startswith(f"{boundary_setting} {boundary['cpus']:.2f} boundary ") and row.endswith("yes (+10 %)") for row in rows), rows
    assert "as captured (the kernel's cpu.stat) 0.20 used 90.0" in rows, rows
    # A v2 path: cpu.max.
    doc = json.loads(cli("advise", _capture(tmp_path, "/sys/fs/cgroup/web.slice"), "--max-throttled", "5%", "--runs", "1", "--json").stdout)
    assert doc["cgroup_version"] == "v2"


def test_advise_asks_which_cgroup_where_several_are_limited(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text(throttlelab.scenario_text("two-spinners") + '\n[[cgroup]]\nname = "b"\nperiod_us = 100000\nquota_us = 50000\n')
    result = cli("advise", str(path), "--max-throttled", "5%")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "--cgroup: which cgroup of two-spinners? (limited cgroups: app, b)" in result.stderr


def test_platform_units_round_up():
    assert PLATFORMS["docker"].setting(105_400, 100_000, 0) == "--cpus 1.054"
    # 10000 us per 30 ms is 33.33...%: systemd must not get less than the quota.
    assert PLATFORMS["systemd"].setting(10_000, 30_000, 0).startswith("CPUQuota=33.34%")
    assert PLATFORMS["kubernetes"].setting(10_050, 100_000, 0) == "limits.cpu 101m"


@pytest.mark.parametrize(
    "args, message",
    [
        (("--cgroup", "nope", "--max-throttled", "0.05"), "no cgroup 'nope' in two-spinners"),
        (("--cgroup", "app", "--max-throttled", "0.05", "--max-p99-ms", "50"), "--max-p99-ms needs a [[service]]"),
        (("--cgroup", "app", "--max-throttled", "2"), "'--max-throttled'"),
        (("--cgroup", "app", "--max-throttled", "120%"), "not in 0..1"),
        (("--cgroup", "app", "--max-throttled", "five"), "is not a ratio"),
    ],
)
def test_advise_bad_input_is_one_line_exit_2(args, message):
    result = cli("advise", "two-spinners", *args)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr


def test_a_bad_run_fails_in_the_runner_before_any_runs():
    from throttlelab.runner import Runner

    text = throttlelab.scenario_text("two-spinners")
    with Runner(workers=2) as runner, pytest.raises(throttlelab.ScenarioError, match="machine.background_us"):
        runner.run_many([(text, ["seed=1"]), (text, ["machine.background_us=2000000"])])


def test_advise_stops_a_settings_seeds_at_the_first_miss_and_answers_the_same(monkeypatch):
    """A bisection's step that misses is judged on its seeds one at a time, up to
    the first that misses: the same answer, byte for byte (runs judged
    included), from fewer simulations than every seed of every step."""
    import throttlelab.advise  # noqa: F401 (the module, not the function of that name)
    from throttlelab import runner as runner_module

    advise_module = sys.modules["throttlelab.advise"]
    text = throttlelab.scenario_text("request-service")
    simulated = []

    real_run_many = runner_module.Runner.run_many

    def run_many(self, runs, step=None):
        simulated.append(len(runs))
        return real_run_many(self, runs, step)

    monkeypatch.setattr(runner_module.Runner, "run_many", run_many)

    def answer():
        simulated.clear()
        doc = advise_module.advise_text(text, "app", 0.05, seeds=2, workers=1)
        return json.dumps(doc), sum(simulated)

    staged, staged_runs = answer()
    monkeypatch.delattr(advise_module._SearchPlan, "stages")  # every seed of every step
    whole, whole_runs = answer()
    assert staged == whole
    assert whole_runs == json.loads(whole)["runs"]
    assert staged_runs < whole_runs


def test_advise_stops_a_missing_run_once_its_miss_is_certain(monkeypatch):
    """A judged-only seed's run stops once its cgroup's nr_throttled is past what
    the target allows of the periods the run can count (``Run.stop``): the same
    answer, byte for byte, from fewer simulated events; every stopped run says so
    and missed."""
    import throttlelab.advise  # noqa: F401 (the module, not the function of that name)
    from throttlelab import runner as runner_module

    advise_module = sys.modules["throttlelab.advise"]
    text = throttlelab.scenario_text("request-service")
    real_simulate = runner_module.simulate
    events, stopped, use_stop = [], [], [True]

    def simulate(text, overrides=(), like_host=None, placed=False, stop=None):
        out = real_simulate(text, overrides, like_host, placed, stop if use_stop[0] else None)
        events.append(out["engine"]["events"])
        if "stopped" in out:
            stopped.append(out)
        return out

    monkeypatch.setattr(runner_module, "simulate", simulate)

    def answer():
        events.clear()
        doc = advise_module.advise_text(text, "app", 0.05, seeds=2, workers=1)
        return json.dumps(doc), sum(events), len(events)

    stopping, stopping_events, stopping_runs = answer()
    ran_stopped = list(stopped)
    use_stop[0] = False
    whole, whole_events, whole_runs = answer()
    assert stopping == whole
    assert stopping_runs == whole_runs  # the same runs, some of them shorter
    assert stopping_events < whole_events
    assert ran_stopped and len(stopped) == len(ran_stopped)  # none without the stop
    for out in ran_stopped:
        app, why = out["cgroups"]["app"], out["stopped"]
        assert why["cgroup"] == "app" and app["nr_throttled"] > why["max_nr_throttled"]
        assert app["throttled_ratio"] > 0.05 and out["duration_s"] == why["at_s"] < 60


def test_a_stop_a_scenario_cannot_take_is_refused():
    """Run.stop's cgroup and ratio are checked before any run, with the core's one line."""
    from throttlelab.runner import Run, Runner

    text = throttlelab.scenario_text("request-service")
    for stop, message in ((("nope", 0.05), 'stop.cgroup: no cgroup named "nope"'), (("app", 1.5), "stop.max_throttled: must be a ratio in 0..1, got 1.5"),
                          (("app", float("nan")), "stop.max_throttled: must be a ratio in 0..1, got NaN")):
        with pytest.raises(_native.ScenarioError, match=f"^{message}$".replace(".", r"\.")):
            with Runner(workers=1) as runner:
                runner.run_many([Run(text, ["duration_s=1"], stop=stop)])
