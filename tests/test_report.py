"""`throttlelab report`: one self-contained index.html with the figures inline."""

from __future__ import annotations

import html

from helpers import cli
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
    # pools and periods for the one limited group, then the CPU timeline
    assert page.count(IMG) == 3
    assert "first 50 ms" in page and "duration_s=1" in page


def test_scenario_without_limit_has_only_the_timeline(tmp_path):
    page = write_report(tmp_path, "two-spinners", "--set", "cgroup.app.quota_us=-1", "--set", "duration_s=0.2")
    assert page.count(IMG) == 1 and "No cgroup has a limit" in page


def test_experiment_report(tmp_path):
    page = write_report(tmp_path, "chiluk-fibtest")
    assert page.count(IMG) == 2  # one chart per column
    assert "1452" in page and "Chiluk, 'Throttling: New Developments in Application Performance with CPU Limits', KubeCon NA 2019" in html.unescape(page)


def test_set_is_refused_for_an_experiment(tmp_path):
    assert_error(cli("report", "ugedal-table2", "--set", "seed=2", "--out", str(tmp_path)), "--set")


def test_unknown_target(tmp_path):
    assert_error(cli("report", "no-such-thing", "--out", str(tmp_path)), "no-such-thing")
