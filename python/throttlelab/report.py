"""``throttlelab report``: one self-contained HTML page (PNG figures embedded as
base64) for a scenario or for a ``reproduce`` experiment.

A scenario page shows, per limited cgroup, its runtime pools over time in the
manner of 000's Fig. 4 (global pool and each CPU's runtime_remaining, refills and
throttles marked), the throttled time of every period, and what each CPU did
(task, throttled, idle). An experiment page sets our values beside the paper's.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from collections import defaultdict
from typing import Any, Callable, Iterable, Optional

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from throttlelab import captured, reproduce as experiments  # noqa: E402
from throttlelab.explain import demand_per_period_ns  # noqa: E402
from throttlelab._native import validate as _native_validate  # noqa: E402
from throttlelab.metrics import CGROUP_METRICS, limit  # noqa: E402
from throttlelab.timeline import (  # noqa: E402
    Trace, cpu_slices, end_ns, instants, limited_groups, pool_levels, simulate, throttled_intervals, time_per_bin_ns,
)

#: Periods shown in the time plots of a scenario unless --window-ms says otherwise.
DEFAULT_WINDOW_PERIODS = 10
#: At most this many CPUs get a line (pools) or a row (timeline); the rest are named as left out.
MAX_POOL_CPUS = 8
MAX_TIMELINE_CPUS = 32

THROTTLED_COLOR = "#d62728"
BACKGROUND_COLOR = "#bbbbbb"


def _png(fig: Figure) -> str:
    """The figure as an <img> with the PNG inline; closes the figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode("ascii")}">'


def _page(title: str, body: Iterable[str]) -> str:
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;max-width:1200px;margin:2em auto}"
        "table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}"
        "img{max-width:100%;display:block;margin:1em 0 0.3em}"
        ".caption{color:#444;max-width:900px;margin:0 0 1.5em}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def write(out_dir: str, page: str) -> str:
    """Write ``page`` as ``out_dir/index.html``; returns the path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


# --- a scenario ---------------------------------------------------------------


def _pools_figure(trace: Trace, tg: int, window: tuple[int, int]) -> tuple[Figure, str]:
    """000 Fig. 4 style: the global pool above, each CPU's runtime_remaining below,
    as steps in ms; refills as dashed lines, throttles as red triangles."""
    lo, hi = window
    levels = pool_levels(trace, [tg])
    name = trace["groups"][tg]
    cpus = sorted(cpu for (g, cpu), steps in levels.items() if g == tg and cpu is not None and _any_in(steps, window))
    shown = cpus[:MAX_POOL_CPUS]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(11, 6), height_ratios=(1, 1.4))
    _step(top, levels.get((tg, None), []), window, color="black", label="global pool")
    for cpu in shown:
        _step(bottom, levels[(tg, cpu)], window, label=f"CPU {cpu}")
    for r in instants(trace, ("refill",)):
        if r["tg"] == tg and lo <= r["t_ns"] <= hi:
            for ax in (top, bottom):
                ax.axvline(r["t_ns"] / 1e6, color="gray", linestyle="--", linewidth=0.8)
    throttles = [r for r in instants(trace, ("throttle",)) if r["tg"] == tg and r["cpu"] in shown and lo <= r["t_ns"] <= hi]
    bottom.scatter(
        [r["t_ns"] / 1e6 for r in throttles], [r["local_ns"] / 1e6 for r in throttles],
        marker="v", color=THROTTLED_COLOR, zorder=3, label="throttle",
    )
    bottom.axhline(0, color="black", linewidth=0.6)
    top.set_ylabel("global pool (ms)")
    bottom.set_ylabel("runtime_remaining (ms)")
    bottom.set_xlabel("time (ms); dashed: period-timer refill")
    more = f" ({len(shown)} of {len(cpus)} CPUs shown)" if len(shown) < len(cpus) else ""
    top.set_title(f"cgroup {name}: runtime pools{more}")
    top.legend(loc="upper right", fontsize="small")
    bottom.legend(loc="upper right", fontsize="small", ncol=min(5, len(shown) + 1))
    caption = (
        "Top: the cgroup's global pool (cfs_b->runtime), refilled by the period timer (dashed lines) and drawn"
        " down 5 ms slices at a time. Bottom: each CPU's local pool (cfs_rq->runtime_remaining); it goes"
        " below zero by what a tick charges late, and a CPU whose pool is empty when the global one is"
        " too throttles (red triangles) until the next refill, while slices stranded on other CPUs may"
        " still hold runtime."
    )
    return fig, caption


def _any_in(steps: list[tuple[int, int]], window: tuple[int, int]) -> bool:
    return any(window[0] <= t <= window[1] for t, _ in steps)


def _step(ax, steps: list[tuple[int, int]], window: tuple[int, int], **style: Any) -> None:
    """A level series as steps over ``window``: starts at the level in force at its
    start, ends at its end."""
    lo, hi = window
    before = [level for t, level in steps if t < lo]
    points = ([(lo, before[-1])] if before else []) + [(t, level) for t, level in steps if lo <= t <= hi]
    if not points:
        return
    points.append((hi, points[-1][1]))
    ax.step([t / 1e6 for t, _ in points], [v / 1e6 for _, v in points], where="post", linewidth=1.2, **style)


def _periods_figure(trace: Trace, tg: int, output: dict[str, Any], until_ns: int) -> tuple[Figure, str]:
    """Throttled time (summed over CPUs) in each period, from refill to refill."""
    name = trace["groups"][tg]
    refills = [r["t_ns"] for r in instants(trace, ("refill",)) if r["tg"] == tg]
    bounds = [0, *refills, until_ns]
    spans = ((start, end) for _cpu, start, end in throttled_intervals(trace, tg, until_ns))
    throttled_ms = [ns / 1e6 for ns in time_per_bin_ns(bounds, spans)]
    starts_s = [a / 1e9 for a in bounds[:-1]]
    widths_s = [(b - a) / 1e9 for a, b in zip(bounds, bounds[1:])]
    fig, ax = plt.subplots(figsize=(11, 3))
    colors = [THROTTLED_COLOR if v > 0 else "#1f77b4" for v in throttled_ms]
    ax.bar(starts_s, throttled_ms, width=widths_s, align="edge", color=colors, edgecolor="white", linewidth=0.3)
    stat = output["cgroups"][name]
    ax.set_title(
        f"cgroup {name}: throttled time per period; {sum(v > 0 for v in throttled_ms)} of {len(throttled_ms)} "
        f"periods with throttling (cpu.stat: nr_throttled {stat['nr_throttled']} of nr_periods {stat['nr_periods']})"
    )
    ax.set_xlabel("period start (s)")
    ax.set_ylabel("throttled (ms, all CPUs)")
    ax.set_xlim(0, until_ns / 1e9)
    caption = (
        "Throttled time in each period, from refill to refill, added up over the CPUs where the cgroup"
        " waited (cpu.stat throttled_usec counts it the same way, so it can exceed the period). Red: a"
        " period with throttling, which nr_throttled counts once however long it lasted."
    )
    return fig, caption


def _timeline_figure(trace: Trace, window: tuple[int, int]) -> tuple[Figure, str]:
    """Per-CPU rows: which task ran (one color per task), throttled (red, hatched),
    idle (blank)."""
    lo, hi = window
    slices = [s for s in cpu_slices(trace, hi) if s.end_ns > lo and s.start_ns < hi]
    cpus = list(range(min(trace["cpus"], MAX_TIMELINE_CPUS)))
    tasks = sorted({s.label for s in slices if s.kind == "run"})
    palette = plt.get_cmap("tab10")
    colors: dict[str, Any] = {}
    for task in tasks:
        colors[task] = BACKGROUND_COLOR if task.startswith("[") else palette(len([c for c in colors if not c.startswith("[")]) % 10)
    by_cpu: dict[int, list] = defaultdict(list)
    for s in slices:
        by_cpu[s.cpu].append(s)
    fig, ax = plt.subplots(figsize=(11, 1 + 0.3 * len(cpus)))
    for row, cpu in enumerate(cpus):
        for kind, style in (("run", {}), ("throttled", {"hatch": "///", "edgecolor": "white"})):
            spans = [s for s in by_cpu[cpu] if s.kind == kind]
            ax.broken_barh(
                [(max(s.start_ns, lo) / 1e6, (min(s.end_ns, hi) - max(s.start_ns, lo)) / 1e6) for s in spans],
                (row - 0.4, 0.8),
                facecolors=[colors[s.label] if kind == "run" else THROTTLED_COLOR for s in spans],
                **style,
            )
    ax.set_yticks(range(len(cpus)), [f"CPU {c}" for c in cpus])
    ax.invert_yaxis()
    ax.set_xlim(lo / 1e6, hi / 1e6)
    ax.set_xlabel("time (ms)")
    more = f" ({len(cpus)} of {trace['cpus']} CPUs)" if len(cpus) < trace["cpus"] else ""
    ax.set_title(f"what each CPU ran{more}; blank: idle")
    handles = [Patch(color=colors[t], label=t) for t in tasks]
    handles.append(Patch(facecolor=THROTTLED_COLOR, hatch="///", edgecolor="white", label="throttled"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    caption = (
        "What each CPU ran: one color per task, hatched red where a throttled cgroup kept the CPU idle"
        " although it had work, blank where there was nothing to run."
    )
    return fig, caption


def _demand_figure(name: str, cg: dict[str, Any], demand_ns: list[int]) -> tuple[Figure, str]:
    """The group's demand in each period (its CPU time without a limit) against its quota."""
    quota_ms, burst_ms = cg["quota_us"] / 1e3, cg["burst_us"] / 1e3
    demand_ms = [d / 1e6 for d in demand_ns]
    over = sum(d > quota_ms for d in demand_ms)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3), width_ratios=(3, 1), sharey=True)
    period_s = cg["period_us"] / 1e6
    colors = [THROTTLED_COLOR if d > quota_ms else "#1f77b4" for d in demand_ms]
    left.bar([i * period_s for i in range(len(demand_ms))], demand_ms, width=period_s, align="edge", color=colors, linewidth=0)
    # Headroom above the highest bar and line, so that a demand equal to the quota still shows.
    top_ms = 1.1 * max(max(demand_ms, default=0), quota_ms + burst_ms)
    right.hist(demand_ms, bins=[top_ms * i / 30 for i in range(31)], orientation="horizontal", color="#1f77b4")
    for ax in (left, right):
        ax.axhline(quota_ms, color="black", linewidth=1, label="quota")
        if burst_ms:
            ax.axhline(quota_ms + burst_ms, color="black", linestyle=":", linewidth=1, label="quota + burst")
    left.set_ylim(0, top_ms)
    left.set_xlabel("period start (s)")
    left.set_ylabel("demand per period (ms, all CPUs)")
    right.set_xlabel("periods")
    left.legend(loc="upper right", fontsize="small")
    left.set_title(f"cgroup {name} ({limit(cg['quota_us'], cg['period_us'], cg['burst_us'])}): demand per period")
    caption = (
        f"Demand: the CPU time cgroup {name}'s threads use in each {cg['period_us'] / 1e3:g} ms period when the cgroup"
        f" has no limit (the same scenario and seed with cpu.max max); right, how often each amount occurs."
        f" {over} of {len(demand_ms)} periods ask for more than the quota (red): a limit this size throttles"
        " at least those, and a mean below the quota does not prevent it."
    )
    return fig, caption


def _latency_figure(output: dict[str, Any]) -> tuple[Figure, str]:
    """Each service's request latency percentiles."""
    services = {name: t["latency_us"] for name, t in output["tasks"].items() if "latency_us" in t}
    quantiles = (("p50", "o"), ("p90", "s"), ("p99", "D"), ("max", "^"))
    fig, ax = plt.subplots(figsize=(11, 1.5 + 0.5 * len(services)))
    for i, lat in enumerate(services.values()):
        ax.hlines(i, lat["p50"] / 1e3, lat["max"] / 1e3, color="gray", linewidth=1)
        for q, marker in quantiles:
            ax.scatter(lat[q] / 1e3, i, marker=marker, s=50, zorder=3, label=q if i == 0 else None)
    ax.set_yticks(range(len(services)), list(services))
    ax.set_ylim(-0.6, len(services) - 0.4)
    ax.set_xscale("log")
    ax.set_xlabel("request latency (ms, log scale)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    ax.set_title("request latency per service")
    caption = (
        "Latency from a request's arrival to its completion, percentiles over every request of the run;"
        " throttling shows as a p99 or max near a period or more, while p50 stays near the request's cost."
    )
    return fig, caption


def _figure(fig_caption: tuple[Figure, str]) -> str:
    fig, caption = fig_caption
    return f"{_png(fig)}<p class=\"caption\">{html.escape(caption)}</p>"


def scenario_page(text: str, overrides: Iterable[str] = (), window_ms: Optional[float] = None) -> str:
    """The HTML page of one simulated scenario; time plots cover ``window_ms`` from
    the start (default: the first 10 periods of the shortest limited period)."""
    overrides = list(overrides)
    output, trace = simulate(text, overrides)
    until = end_ns(output)
    resolved = json.loads(_native_validate(text, overrides))
    groups = {cg["name"]: cg for cg in resolved["cgroups"]}
    limited = limited_groups(resolved)
    if window_ms is None:
        periods_us = [groups[trace["groups"][tg]]["period_us"] for tg in limited]
        window_ms = DEFAULT_WINDOW_PERIODS * min(periods_us, default=100_000) / 1e3
    window = (0, min(until, round(window_ms * 1e6)))

    shown = [m for m in CGROUP_METRICS if m.key != "burst_usec"]
    stats = [[name, limit(**cg["limit"]), *(m.show(cg[m.key]) for m in shown)] for name, cg in output["cgroups"].items()]
    body = [
        f"<h1>{html.escape(output['scenario'])}</h1>",
        f"<p>simulated {output['duration_s']:g} s, profile {html.escape(output['profile'])}, seed {output['seed']}"
        + (f", overrides: <code>{html.escape(' '.join(overrides))}</code>" if overrides else "") + "</p>",
        _html_table(["cgroup", "limit", *(m.header for m in shown)], stats),
    ]
    body += _captured(text, resolved, output)
    if not limited:
        body.append("<p>No cgroup has a limit: there are no pools to show.</p>")
    for tg in limited:
        name = trace["groups"][tg]
        cg = groups[name]
        demand = demand_per_period_ns(text, overrides, name)
        body += [
            f"<h2>cgroup {html.escape(name)}: {html.escape(limit(cg['quota_us'], cg['period_us'], cg['burst_us']))}</h2>",
            _figure(_demand_figure(name, cg, demand)),
            _figure(_periods_figure(trace, tg, output, until)),
            _figure(_pools_figure(trace, tg, window)),
        ]
    if any("latency_us" in t for t in output["tasks"].values()):
        body += ["<h2>Services</h2>", _figure(_latency_figure(output))]
    body += [f"<h2>CPUs, first {window_ms:g} ms</h2>", _figure(_timeline_figure(trace, window))]
    return _page(output["scenario"], body)


def _captured(text: str, resolved: dict[str, Any], output: dict[str, Any]) -> list[str]:
    """For a capture: what the kernel's cpu.stat counted over it, beside the
    replay's counts of the captured cgroup (the cgroup of its threads)."""
    at_limit = captured.at_limit(text)
    name = next((t["cgroup"] for t in resolved["tasks"] if t.get("phases_file") and t["cgroup"]), None)
    if at_limit is None or name not in output["cgroups"]:
        return []
    replay = output["cgroups"][name]

    def row(label: str, usage_usec: float, periods: int, throttled: int) -> list[str]:
        ratio = f"{100 * throttled / periods:.1f}" if periods else "-"
        return [label, f"{usage_usec / 1e6:.3f}", str(periods), str(throttled), ratio]

    return [
        f"<h2>cgroup {html.escape(name)}: the capture and its replay</h2>",
        _html_table(["", "usage s", "nr_periods", "nr_throttled", "throttled %"], [
            row(f"captured ({html.escape(at_limit['source'])}, the kernel's cpu.stat)", at_limit["usage_usec"],
                at_limit["nr_periods"], at_limit["nr_throttled"]),
            row("replayed (simulated)", replay["usage_usec"], replay["nr_periods"], replay["nr_throttled"]),
        ]),
    ]


# --- an experiment --------------------------------------------------------------


def _experiment_figure(doc: dict[str, Any], column: dict[str, Any]) -> Figure:
    """One column of an experiment as grouped bars, ours beside the paper's, one
    panel per paper figure. A column whose paper figures are in another unit gets
    the paper's bars on their own axis."""
    panels: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in doc["rows"]:
        panels[row["panel"]].append(row)
    key = column["key"]
    handles: dict[str, Any] = {}
    fig, axes = plt.subplots(
        1, len(panels), figsize=(min(16, 3 + 3.5 * len(panels) + 0.12 * len(doc["rows"])), 3.6), squeeze=False, sharey=True
    )
    paper_axes = []
    for ax, (panel, rows) in zip(axes[0], panels.items()):
        xs = range(len(rows))
        ours = [r["values"][key]["ours"] for r in rows]
        paper = [r["values"][key]["paper"] for r in rows]
        width = 0.4
        handles["throttlelab"] = ax.bar([x - width / 2 for x in xs], ours, width, color="#1f77b4")
        given = [(x, p) for x, p in zip(xs, paper) if p is not None]  # a bar only where the paper has a number
        if given:
            paper_ax = ax if column["same_unit"] else ax.twinx()
            handles["paper"] = paper_ax.bar([x + width / 2 for x, _ in given], [p for _, p in given], width, color="#ff7f0e")
            if paper_ax is not ax:
                paper_ax.set_ylabel(f"paper: {column['paper_unit']}")
                paper_axes.append(paper_ax)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xticks(list(xs), [r["case"] for r in rows], rotation=90 if len(rows) > 8 else 0, fontsize="small")
        if panel:
            ax.set_title(panel)
        ax.set_xlabel(doc["axis"])
        ax.set_ylabel(column["header"] if column["same_unit"] else f"ours: {column['header']}")
    if paper_axes:  # one scale for the paper's unit in every panel, as for ours
        top = max(ax.get_ylim()[1] for ax in paper_axes)
        for ax in paper_axes:
            ax.set_ylim(0, top)
    fig.suptitle(f"{doc['name']}: {column['header']}")
    fig.tight_layout()
    fig.legend(list(handles.values()), list(handles), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    return fig


def _experiment_caption(doc: dict[str, Any], column: dict[str, Any]) -> str:
    seeds = ", ".join(map(str, doc["seeds"]))
    paper = "the paper's figure (orange) where it gives one" + (
        "" if column["same_unit"] else f", on its own axis in {column['paper_unit']}: compare ratios between rows, not heights"
    )
    return f"{column['header']} for each {doc['axis'] or 'case'}: throttlelab's mean over seeds {seeds} (blue) beside {paper}."


def experiment_page(experiment: experiments.Experiment, on_run: Callable[[], None] = lambda: None) -> str:
    """The HTML page of one ``reproduce`` experiment: its table and one bar chart per column."""
    doc = experiments.reproduce(experiment, on_run)
    header, rows = experiments.cells(doc)
    body = [
        f"<h1>{html.escape(doc['name'])}: {html.escape(doc['title'])}</h1>",
        f"<p>Mean over seeds {', '.join(map(str, doc['seeds']))}. {html.escape(experiments.caption(doc))}</p>",
        *(_figure((_experiment_figure(doc, col), _experiment_caption(doc, col))) for col in doc["columns"]),
        _html_table(header, rows),
    ]
    return _page(doc["name"], body)
