"""``throttlelab report --prometheus URL -o DIR``: advise --prometheus's fleet
as one HTML page (report.py's page, table and figure helpers): the table, then
for each limited container its usage per window against its limit, the windows
it was throttled in marked, and the recommended limit with its prediction."""

from __future__ import annotations

import html
from typing import Any

import matplotlib.pyplot as plt

from throttlelab.prometheus import Container
from throttlelab.prometheus_advise import _name, _pct
from throttlelab.report import THROTTLED_COLOR, _figure, _html_table, _page

#: Figures for at most this many containers (the most throttled first); the rest are named.
MAX_FIGURES = 60


def _container_figure(row: dict[str, Any], c: Container) -> tuple[Any, str]:
    fig, ax = plt.subplots(figsize=(9, 2.6))
    t0 = c.windows[0].start_s
    throttled = ax.twinx()
    for w in c.windows:
        x = [(w.start_s - t0) / 60, (w.end_s - t0) / 60]
        ax.plot(x, [1000 * w.usage_cpus] * 2, color="#1f77b4", lw=2)
        if w.throttled_periods:
            throttled.bar(x[0], 100 * w.throttled_ratio, width=x[1] - x[0], align="edge", color=THROTTLED_COLOR, alpha=0.3)
    throttled.set_ylim(0, 100)
    throttled.set_ylabel("throttled % of periods", color=THROTTLED_COLOR)
    ax.set_zorder(throttled.get_zorder() + 1)
    ax.patch.set_visible(False)
    end = (c.windows[-1].end_s - t0) / 60
    ax.hlines(row["limit_m"], 0, end, color="black", lw=1, label=f"limit {row['limit_m']}m")
    if row["recommended_m"] is not None:
        ax.hlines(row["recommended_m"], 0, end, color="green", ls="--", lw=1, label=f"recommended {row['recommended_m']}m")
    ax.set_xlabel("minutes")
    ax.set_ylabel("usage (millicores)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize=8)
    caption = (
        f"{_name(row)}: usage per {c.windows[0].end_s - c.windows[0].start_s:g} s window (blue) against its limit;"
        f" red bars: the share of each window's periods throttled (right axis), {_pct(row['throttled_now'])} % in all."
    )
    if row["recommended_m"] is not None:
        caption += (
            f" At {row['recommended_m']}m the {row['models']} consistent models predict"
            f" {_pct(row['predicted_low'])}-{_pct(row['predicted_high'])} % throttled."
        )
    else:
        caption += f" {row['status']}: {row['reason']}"
    return fig, caption


def page(rows: list[dict[str, Any]], found: dict[str, Container], meta: dict[str, Any]) -> str:
    header = ["namespace", "workload", "container", "limit", "p50", "p95", "max", "throttled %", "advice", "predicted %", "range %", "models"]
    table = []
    for r in rows:
        advice = f"{r['recommended_m']}m" if r["recommended_m"] is not None else r["status"]
        spread = f"{_pct(r['predicted_low'])}-{_pct(r['predicted_high'])}" if r["recommended_m"] is not None else ""
        table.append([
            r["namespace"], r["workload"], _name(r), "no limit" if r["limit_m"] is None else f"{r['limit_m']}m",
            f"{r['usage_p50_m']}m", f"{r['usage_p95_m']}m", f"{r['usage_max_m']}m", _pct(r["throttled_now"]),
            advice, _pct(r["predicted_throttled"]), spread, r["models"] or "",
        ])
    title = f"throttlelab: {meta['prometheus']} {meta['selector'] or '(every container)'}"
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{meta['range']} at {meta['step']}; target: throttled at most {100 * meta['max_throttled']:g} % of periods."
        " Model, refusals and what it cannot see: docs/prometheus.md.</p>",
        _html_table(header, table),
    ]
    shown = sorted((r for r in rows if r["limit_m"] is not None and r["windows"]), key=lambda r: -r["throttled_now"])
    for r in shown[:MAX_FIGURES]:
        body.append(f"<h3>{html.escape(_name(r))}</h3>")
        body.append(_figure(_container_figure(r, found[_name(r)])))
    if len(shown) > MAX_FIGURES:
        body.append(f"<p>{len(shown) - MAX_FIGURES} less throttled containers not drawn.</p>")
    return _page(title, body)
