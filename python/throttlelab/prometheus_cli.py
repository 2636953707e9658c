"""``advise --prometheus``'s options and command body (cli.advise hands over to
:func:`advise_command` when --prometheus is given)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Callable, Optional

import click

from throttlelab.platforms import PLATFORMS
from throttlelab.prometheus import PrometheusError, connect, duration_s, matchers, steps
from throttlelab.prometheus_latency import check_name
from throttlelab.runner import EXECUTORS, Runner

#: Where the counters come from and where the simulations run: advise's and report's.
_COMMON = (
    click.option("--prometheus", metavar="URL", help="Every container a Prometheus scrapes cAdvisor for (no SCENARIO, no --cgroup): e.g. http://127.0.0.1:9090."),
    click.option("--selector", default="", metavar="MATCHERS", help='With --prometheus: PromQL label matchers, e.g. namespace="shop", pod=~"web-.*".'),
    click.option("--range", "range_", default="1h", show_default=True, metavar="DURATION", help="With --prometheus: how far back to read (e.g. 10m, 7d)."),
    click.option("--step", default="1m", show_default=True, metavar="DURATION", help="With --prometheus: one window per step (whole seconds)."),
    click.option("--end", metavar="TIME", help="With --prometheus: the range ends here (unix seconds or ISO 8601; default now)."),
    click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True, help="With --prometheus: where the fits and searches run."),
    click.option("--address", help="With --prometheus and --executor ray: a Ray cluster's address."),
    click.option("--workers", type=click.IntRange(min=1), help="With --prometheus: local processes or Ray CPUs."),
)
_ADVISE = (
    click.option("--csv", "as_csv", is_flag=True, help="With --prometheus: print the rows as CSV."),
    click.option("--patch", metavar="FILE", help="With --prometheus: write the recommended limits as Kubernetes patches (YAML) to FILE."),
    click.option("--capture", "captures", multiple=True, metavar="NAME=FILE", help="With --prometheus: advise container NAME (namespace/pod/container or id) from its capture FILE instead of the model (repeatable)."),
    click.option("--latency-metric", metavar="NAME", help="With --prometheus: a request-latency histogram (e.g. http_request_duration_seconds), joined by namespace/pod/container: each row's observed p99 and the p99 predicted at its advice, which --max-p99-ms bounds."),
)
_REPORT = (
    click.option("--max-throttled", type=click.FloatRange(0, 1), default=0.05, show_default=True, help="With --prometheus: the target the recommendations meet (a ratio)."),
)


def _decorate(f: Callable[..., Any], opts: tuple[Any, ...]) -> Callable[..., Any]:
    for option in reversed(opts):
        f = option(f)
    return f


def options(f: Callable[..., Any]) -> Callable[..., Any]:
    """advise's --prometheus options."""
    return _decorate(f, _COMMON + _ADVISE)


def report_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """report's --prometheus options."""
    return _decorate(f, _COMMON + _REPORT)


def _end(text: Optional[str]) -> float:
    if text is None:
        return time.time()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise PrometheusError(f"--end {text!r} is not unix seconds nor an ISO 8601 time") from None


def _capture_advice(spec: str, max_throttled: float, platform: str) -> tuple[str, Callable[[], dict[str, Any]]]:
    """``NAME=FILE`` -> (NAME, advise on the capture FILE's only limited cgroup)."""
    import json

    from throttlelab import _native
    from throttlelab.advise import advise_text
    from throttlelab.scenarios import load_scenario_text

    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise PrometheusError(f"--capture {spec!r}: expected NAME=FILE")
    text, _ = load_scenario_text(path)
    limited = [g["name"] for g in json.loads(_native.validate(text, []))["cgroups"] if g.get("quota_us") is not None]
    if len(limited) != 1:
        raise PrometheusError(f"--capture {spec!r}: the capture has {len(limited)} limited cgroups, needs one")
    return name, lambda: advise_text(text, limited[0], max_throttled, platform=platform)


def _advise(
    prometheus: str, selector: str, range_: str, step: str, end: Optional[str], executor: str, address: Optional[str],
    workers: Optional[int], max_throttled: float, platform: str, captures: tuple[str, ...] = (), keep: Optional[dict[str, Any]] = None,
    latency_metric: Optional[str] = None, max_p99_ms: Optional[float] = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows and what they were asked with (advise_prometheus on the server)."""
    from throttlelab.prometheus_advise import advise_prometheus
    from throttlelab.terminal import Terminal

    matchers(selector)
    range_s, step_s = duration_s(range_, "--range"), duration_s(step, "--step")
    at = steps(_end(end), range_s, step_s)
    query = connect(prometheus, at[0], at[-1], step_s)
    capture_advice = dict(_capture_advice(spec, max_throttled, platform) for spec in captures)
    timings: dict[str, float] = {}
    with Runner(executor, address, workers) as runner:
        rows = advise_prometheus(query, selector, at, max_throttled, runner, capture_advice, timings, keep, latency_metric, max_p99_ms)
    Terminal().note(
        f"{len(rows)} containers; fit {timings['fitted']} in {timings['fit_s']:.1f} s, searched {timings['searched']}"
        f" in {timings['search_s']:.1f} s ({executor})"
    )
    meta = {
        "prometheus": prometheus, "selector": selector, "range": range_, "step": step, "end_s": at[-1],
        "platform": PLATFORMS[platform].name, "max_throttled": max_throttled,
        **({"latency_metric": latency_metric, "max_p99_ms": max_p99_ms} if latency_metric else {}),
    }
    return rows, meta


def advise_command(
    ctx: click.Context, scenario: Optional[str], cgroup: Optional[str], max_throttled: float, max_p99_ms: Optional[float],
    platform: str, as_json: bool, prometheus: str, selector: str, range_: str, step: str, end: Optional[str], as_csv: bool,
    patch: Optional[str], captures: tuple[str, ...], latency_metric: Optional[str], executor: str, address: Optional[str],
    workers: Optional[int], **_ignored: Any,
) -> int:
    """advise --prometheus: the table (or JSON, CSV) and the patch file."""
    from throttlelab.prometheus_advise import patch_yaml, render, to_csv, to_json
    from throttlelab.terminal import Terminal

    if scenario or cgroup:
        raise PrometheusError("--prometheus reads every container a selector matches: give no SCENARIO and no --cgroup")
    if max_p99_ms is not None and not latency_metric:
        raise PrometheusError("--max-p99-ms with --prometheus needs --latency-metric NAME (a request-latency histogram): cAdvisor's counters hold no latency")
    if latency_metric:
        check_name(latency_metric)
    if as_json and as_csv:
        raise PrometheusError("--json and --csv: choose one")
    if ctx.get_parameter_source("platform") == click.core.ParameterSource.DEFAULT:
        platform = "kubernetes"
    if patch and platform != "kubernetes":
        raise PrometheusError(f"--patch writes Kubernetes resources: not with --platform {platform}")
    rows, meta = _advise(prometheus, selector, range_, step, end, executor, address, workers, max_throttled, platform, captures, None, latency_metric, max_p99_ms)
    if patch:
        command = f"throttlelab advise --prometheus {prometheus} --selector '{selector}' --range {range_} --max-throttled {max_throttled:g}"
        if latency_metric:
            command += f" --latency-metric {latency_metric}" + (f" --max-p99-ms {max_p99_ms:g}" if max_p99_ms is not None else "")
        with open(patch, "w") as f:
            f.write(patch_yaml(rows, command))
    if as_json:
        click.echo(to_json(rows, meta))
    elif as_csv:
        click.echo(to_csv(rows), nl=False)
    else:
        Terminal().print(*render(rows, meta))
    return 0


def report_command(
    target: Optional[str], overrides: tuple[str, ...], out_dir: str, window_ms: Optional[float], prometheus: str, selector: str,
    range_: str, step: str, end: Optional[str], executor: str, address: Optional[str], workers: Optional[int], max_throttled: float,
) -> str:
    """report --prometheus: the fleet's page; returns its HTML."""
    from throttlelab.prometheus_report import page

    if target or overrides or window_ms is not None:
        raise PrometheusError("report --prometheus draws the containers a selector matches: give no TARGET, --set or --window-ms")
    keep: dict[str, Any] = {}
    rows, meta = _advise(prometheus, selector, range_, step, end, executor, address, workers, max_throttled, "kubernetes", keep=keep)
    return page(rows, keep, meta)
