"""`throttlelab report`: one self-contained index.html with the figures inline."""

from __future__ import annotations

import html

from helpers import cli, write_capture
from throttlelab import reproduce as experiments
from test_errors import assert_error

IMG = '<img src="data:image/png;base64,'


def write_report(tmp_path, *args: str) -> str:
    out = tmp_path / "report"
    result = cli("report", *args, "--out", str(out))
    assert result.exit_code == 0, result.stderr
    page = (out / "index.html").read_text()
    assert list(out.iterdir()) == [out / "index.html"]  # nothing else to ship
    assert "src=\"http" not in page and "<link" not in page
    return page


def test_scenario_report(tmp_path):
    page = write_report(tmp_path, "two-spinners", "--set", "duration_s=1", "--window-ms", "50")
    # demand, throttling per period and pools for the one limited group, then the CPU timeline
    assert page.count(IMG) == 4
    assert "first 50 ms" in page and "duration_s=1" in page
    # Every figure has a caption, and the limit is named beside the throttling.
    assert page.count('<p class="caption">') == page.count(IMG)
    assert "cgroup app: cpu.max 20000 10000 (2 CPUs, 2000m)" in page


def test_demand_per_period_is_the_unlimited_runs_cpu_time(tmp_path):
    # Two spinners on 2 CPUs want 20 ms in every 10 ms period: with 15 ms of quota, every period asks for more.
    page = write_report(tmp_path, "two-spinners", "--set", "duration_s=0.5", "--set", "cgroup.app.quota_us=15000")
    assert "50 of 50 periods ask for more than the quota" in page


def test_a_service_gets_a_latency_figure(tmp_path):
    page = write_report(tmp_path, "request-service", "--set", "duration_s=2")
    assert "<h2>Services</h2>" in page and page.count(IMG) == 5


def test_scenario_without_limit_has_only_the_timeline(tmp_path):
    page = write_report(tmp_path, "two-spinners", "--set", "cgroup.app.quota_us=-1", "--set", "duration_s=0.2")
    assert page.count(IMG) == 1 and "No cgroup has a limit" in page


def test_experiment_report(tmp_path):
    page = write_report(tmp_path, "chiluk-fibtest")
    assert page.count(IMG) == len(experiments.get("chiluk-fibtest").columns) == 3  # one chart per column
    assert "for each fibtest threads (one panel per kernel and limit)" in page
    assert "1452" in page and "Chiluk, 'Throttling: New Developments in Application Performance with CPU Limits', KubeCon NA 2019" in html.unescape(page)


def test_set_is_refused_for_an_experiment(tmp_path):
    assert_error(cli("report", "ugedal-table2", "--set", "seed=2", "--out", str(tmp_path)), "--set")


def test_unknown_target(tmp_path):
    assert_error(cli("report", "no-such-thing", "--out", str(tmp_path)), "no-such-thing")


def test_a_capture_shows_the_kernels_cpu_stat_beside_the_replays(tmp_path):
    path = write_capture(tmp_path, "/sys/fs/cgroup/cpu/w", usage_usec=401000)
    page = write_report(tmp_path, path)
    assert "<h2>cgroup app: the capture and its replay</h2>" in page
    captured = "<tr><td>captured (/sys/fs/cgroup/cpu/w, the kernel&#x27;s cpu.stat)</td><td>0.401</td><td>20</td><td>18</td><td>90.0</td></tr>"
    assert captured in page
    # The replay at the same limit: 20 ms of quota a period for a thread that wants 40.
    replayed = page.split("<td>replayed (simulated)</td>")[1].split("</tr>")[0]
    usage_s, periods, throttled, ratio = [c.removeprefix("<td>").removesuffix("</td>") for c in replayed.split("</td><td>")]
    assert 0.38 <= float(usage_s) <= 0.41 and int(periods) >= 19 and float(ratio) > 80, replayed
