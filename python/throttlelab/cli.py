"""The ``throttlelab`` command line: run (simulate), real (measure on the host kernel),
validate, list and benchmark scenarios."""

from __future__ import annotations

import json
import re
import math
import sys
from typing import Any, Optional

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from throttlelab import _native
from throttlelab import reproduce as experiments
from throttlelab.bench import measure
from throttlelab.compare import compare as compare_runs
from throttlelab.scenarios import ScenarioNotFound, builtin_names, description, load_scenario_text
# Modules named like the package's functions throttlelab.sweep and throttlelab.advise: import from them.
from throttlelab.advise import AdviseError, advise_text, explain
from throttlelab.sweep import EXECUTORS, SweepError, parse_grid, sweep_rows

DEFAULT_SCENARIO = "ugedal-table2"

#: Errors that are the user's input, not a bug: reported in one line, exit code 2.
USER_ERRORS = (
    _native.ScenarioError, _native.HarnessError, ScenarioNotFound, experiments.UnknownExperiment,
    SweepError, AdviseError,
)


#: Exit codes: 0 ok, 2 bad input (or a refusal of the real backend), 3 a bug
#: (a panic in the Rust core), 130 / 143 interrupted by SIGINT / SIGTERM.
EXIT_INPUT, EXIT_INTERNAL, EXIT_SIGINT, EXIT_SIGTERM = 2, 3, 130, 143


class _Cli(click.Group):
    """A click group that reports every error as one line on stderr, never a traceback."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args:  # bare `throttlelab`: help, as click < 8.2 did, not a usage error
            click.echo(ctx.get_help())
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def main(self, *args: Any, **extra: Any) -> None:  # type: ignore[override]
        extra["standalone_mode"] = False
        try:
            rv = super().main(*args, **extra)
        except click.ClickException as e:
            _fail(e.format_message(), e.exit_code)
        except USER_ERRORS as e:
            _fail(str(e), EXIT_INPUT)
        except _native.Interrupted as e:
            _fail(str(e), EXIT_SIGTERM if "SIGTERM" in str(e) else EXIT_SIGINT)
        except click.Abort:
            _fail("interrupted", EXIT_SIGINT)
        except _native.PanicException as e:  # a BaseException: only this clause catches it
            _exit(f"internal error: {e} (please report)", EXIT_INTERNAL)
        # Without standalone mode click returns the exit code of --help and the like.
        sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str, code: int) -> None:
    _exit(f"error: {message}", code)


def _exit(message: str, code: int) -> None:
    """Print ``throttlelab: <message>`` as one line, its control characters
    escaped (it may quote user input), and exit with ``code``."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    click.echo(f"throttlelab: {line}", err=True)
    sys.exit(code)


set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a scenario key, e.g. cgroup.app.quota_us=50000 (repeatable).",
)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_native.__version__, prog_name="throttlelab")
def main() -> None:
    """Simulate Linux CFS bandwidth control (cpu.max) throttling."""


@main.command()
@click.argument("scenario", default=DEFAULT_SCENARIO)
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the output document as JSON.")
def run(scenario: str, overrides: tuple[str, ...], as_json: bool) -> None:
    """Simulate SCENARIO (a built-in name or a TOML file; default ugedal-table2)."""
    text, _ = load_scenario_text(scenario)
    _emit(_native.run(text, list(overrides)), as_json)


@main.command()
@click.argument("scenario")
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the output document as JSON.")
def real(scenario: str, overrides: tuple[str, ...], as_json: bool) -> None:
    """Run SCENARIO on the host kernel in real cgroups and read cpu.stat (needs root).

    The cgroups live under one parent, throttlelab-<pid>, removed at the end, on
    error and on Ctrl-C. THROTTLELAB_CGROUP_ROOT overrides where the cgroup
    hierarchies are mounted (default /sys/fs/cgroup)."""
    text, _ = load_scenario_text(scenario)
    _emit(_native.real(text, list(overrides), sys.executable), as_json)


def _emit(out: str, as_json: bool) -> None:
    """Print an output document: exactly the native JSON (byte-for-byte
    reproducible for a seed), or as tables."""
    if as_json:
        click.echo(out)
    else:
        _print_report(json.loads(out))


@main.command()
@click.argument("scenario")
@set_option
@click.option("--runs", default=3, show_default=True, type=click.IntRange(min=1), help="Kernel runs, and simulator seeds.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison (with every run) as JSON.")
def compare(scenario: str, overrides: tuple[str, ...], runs: int, as_json: bool) -> None:
    """Run SCENARIO on the host kernel and in the simulator, side by side (needs root).

    The simulator gets the host's CONFIG_HZ and the profile of its kernel release;
    the verdict says whether its mean lies inside the kernel's own run-to-run range."""
    text, _ = load_scenario_text(scenario)
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    )
    with progress:
        bar = progress.add_task("compare", total=2 * runs)
        result = compare_runs(text, overrides, runs, lambda label: progress.update(bar, advance=1, description=label))
    if as_json:
        click.echo(json.dumps(result))
        return
    _print_comparison(result)


def _print_comparison(result: dict[str, Any]) -> None:
    console = _console()
    host = result["host"]
    console.print(
        f"[bold]{result['scenario']}[/bold]  {result['runs']} runs  host {host['release']}"
        f" HZ={host['hz']} cgroup {host['cgroup']}  simulator: {' '.join(result['sim_overrides'])};"
        " each run started and its period timers placed as in its kernel run"
    )
    for name, rows in result["cgroups"].items():
        table = _table(escape(f"cgroup {name}: mean (sd) [range]"))
        for col in ("metric", "kernel", "simulator", "verdict"):
            table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
        for metric, row in rows.items():
            label, scale = _METRIC_DISPLAY.get(metric, (metric, 1.0))
            cells = [_stats_cell(row[side], scale) for side in ("kernel", "sim")]
            table.add_row(label, *cells, "inside" if row["inside"] else "[red]outside[/red]")
        console.print(table)


def _stats_cell(stats: dict[str, float], scale: float) -> str:
    m, sd, lo, hi = (stats[k] * scale for k in ("mean", "sd", "lo", "hi"))
    return f"{m:,.4g} ({sd:,.2g}) [{lo:,.4g}..{hi:,.4g}]"


#: How compare shows each metric: a label with its unit, and the factor to get there.
_METRIC_DISPLAY = {
    "usage_usec": ("usage s", 1e-6),
    "throttled_usec": ("throttled ms", 1e-3),
    "burst_usec": ("burst ms", 1e-3),
    "throttled_ratio": ("throttled %", 100.0),
}


def _print_report(doc: dict[str, Any]) -> None:
    console = _console()
    console.print(
        f"[bold]{doc['scenario']}[/bold]  backend {doc['backend']}  profile {doc['profile']}"
        f"  seed {doc['seed']}  duration {doc['duration_s']:g} s"
    )
    if doc["cgroups"]:
        cgroups = _table("cgroups")
        # cpu.stat's usage_usec, nr_periods, nr_throttled, throttled ratio, throttled_usec, nr_bursts
        for col in ("cgroup", "usage s", "periods", "throttled", "throttled %", "throttled s", "bursts"):
            cgroups.add_column(col, justify="left" if col == "cgroup" else "right")
        for name, cg in doc["cgroups"].items():
            cgroups.add_row(
                name,
                _seconds(cg["usage_usec"]),
                str(cg["nr_periods"]),
                str(cg["nr_throttled"]),
                f"{100 * cg['throttled_ratio']:.1f}",
                _seconds(cg["throttled_usec"]),
                str(cg["nr_bursts"]),
            )
        console.print(cgroups)

    tasks = doc["tasks"]
    # Columns for what some task reports: (header, key, format).
    optional = [
        ("class", "class", str),
        ("delay s", "delay_s", lambda v: "-" if v is None else f"{v:.3f}"),
        ("misses", "deadline_misses", str),
        ("refusals", "admission_refusals", str),
    ]
    optional = [c for c in optional if any(c[1] in t for t in tasks.values())]
    with_latency = any("latency_us" in t for t in tasks.values())
    table = _table("tasks")
    cols = ["task", "threads", "cpu s", "work s", "finished s", *(c[0] for c in optional)]
    cols += ["p50 ms", "p99 ms"] if with_latency else []
    for col in cols:
        table.add_column(col, justify="left" if col in ("task", "class") else "right")
    for name in sorted(tasks, key=_natural):
        t = tasks[name]
        row = [name, str(t["threads"]), _seconds(t["cpu_usec"]), _seconds(t["work_usec"])]
        row.append("-" if t["finished_s"] is None else f"{t['finished_s']:.3f}")
        row += [fmt(t[key]) if key in t else "" for _, key, fmt in optional]
        if with_latency:
            lat = t.get("latency_us") or {}
            row += [_millis(lat.get("p50")), _millis(lat.get("p99"))]
        table.add_row(*row)
    console.print(table)

    engine = doc.get("engine")
    if engine:
        console.print(f"engine: {engine['events']} events in {engine['wall_s']:.3f} s wall")
    host = doc.get("host")
    if host:
        hz = "unknown" if host["hz"] is None else host["hz"]
        console.print(
            f"host: {host['release']}, CONFIG_HZ {hz}, cgroup {host['cgroup']}; other work preempted each CPU "
            f"{host['background_per_s']:.0f} times a second for {host['background_us']:.0f} us"
        )
        offsets = host.get("period_timer_offset_us", {})
        if offsets:
            listed = ", ".join(f"{name} {us:,.1f} us" for name, us in sorted(offsets.items(), key=lambda kv: _natural(kv[0])))
            console.print(f"period timers (expiries at this offset plus whole periods of CLOCK_MONOTONIC): {listed}")


def _natural(name: str) -> list[Any]:
    """Sort key that puts task2 before task10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _table(title: str) -> Table:
    """A compact table, so that a report fits in 80 columns."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)


def _console() -> Console:
    """stdout's console; off a terminal (a pipe, a file) tables are not cut to 80
    columns but keep their natural width, up to 120."""
    return Console() if Console().is_terminal else Console(width=120)


def _seconds(usec: int) -> str:
    """Seconds to the millisecond, or to fewer places once that makes no difference."""
    s = usec / 1e6
    return f"{s:.3f}" if s < 100 else f"{s:.1f}" if s < 10_000 else f"{s:.0f}"


def _millis(usec: Optional[float]) -> str:
    return "-" if usec is None else f"{usec / 1e3:.2f}"


@main.command()
def scenarios() -> None:
    """List the built-in scenarios."""
    for name in builtin_names():
        click.echo(f"{name}  {description(load_scenario_text(name)[0])}")


@main.command()
@click.argument("scenario")
@set_option
def validate(scenario: str, overrides: tuple[str, ...]) -> None:
    """Check SCENARIO (a TOML file or a built-in name) without simulating it."""
    text, _ = load_scenario_text(scenario)
    resolved = json.loads(_native.validate(text, list(overrides)))
    click.echo(f"ok: {resolved['name']} ({len(resolved['cgroups'])} cgroups, {len(resolved['tasks'])} tasks)")


@main.command()
@click.argument("names", nargs=-1)
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(min=1), help="Runs per scenario; the fastest counts.")
@click.option("--json", "as_json", is_flag=True, help="Print the records as a JSON list.")
def bench(names: tuple[str, ...], repeat: int, as_json: bool) -> None:
    """Time built-in scenarios NAMES (default: all of them)."""
    names = names or tuple(builtin_names())
    for name in names:  # fail on a bad name before spending time on the others
        load_scenario_text(name)
    records = []
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    )
    with progress:
        task = progress.add_task("bench", total=len(names))
        for name in names:
            progress.update(task, description=name)
            records.append(measure(name, repeat))
            progress.advance(task)
    if as_json:
        click.echo(json.dumps(records))
        return
    table = _table(f"bench (best of {repeat})")
    for col in ("scenario", "sim s", "wall s", "events", "events/s", "speedup"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    for r in records:
        table.add_row(
            r["scenario"], f"{r['sim_s']:g}", f"{r['wall_s']:.3f}", str(r["events"]),
            f"{r['events_per_s']:,.0f}", f"{r['speedup']:,.1f}x",
        )
    _console().print(table)


@main.command(epilog=f"Experiments: {', '.join(experiments.EXPERIMENTS)}.")
@click.argument("name", required=False)
@click.option("--all", "run_all", is_flag=True, help="Run every experiment.")
@click.option("--json", "as_json", is_flag=True, help="Print the experiments and their rows as JSON.")
def reproduce(name: Optional[str], run_all: bool, as_json: bool) -> None:
    """Run the seed papers' experiment NAME and set our figures beside the paper's."""
    if (name is not None) == run_all:
        raise click.UsageError(f"give one experiment or --all ({', '.join(experiments.EXPERIMENTS)})")
    chosen = list(experiments.EXPERIMENTS.values()) if run_all else [experiments.get(name)]
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    )
    docs = []
    with progress:
        task = progress.add_task("reproduce", total=sum(experiments.run_count(e) for e in chosen))
        for experiment in chosen:
            progress.update(task, description=experiment.name)
            docs.append(experiments.reproduce(experiment, lambda: progress.advance(task)))
    if as_json:
        click.echo(json.dumps(docs))
        return
    # Piped (e.g. into docs/reproduce.md), rich would squeeze the widest table into 80 columns.
    console = _console()
    for doc in docs:
        console.print(experiments.render(doc))


@main.command("trace")
@click.argument("scenario")
@set_option
@click.option("-o", "--out", "out_path", default="trace.json", show_default=True, type=click.Path(dir_okay=False, writable=True), help="Where to write the trace.")
def trace_cmd(scenario: str, overrides: tuple[str, ...], out_path: str) -> None:
    """Simulate SCENARIO and write a Chrome/Perfetto JSON trace (open it in ui.perfetto.dev):
    CPU tracks with task and throttled slices, runtime pools as counters, refills as instants."""
    from throttlelab.perfetto import chrome_trace
    from throttlelab.timeline import end_ns, simulate

    text, _ = load_scenario_text(scenario)
    output, trace = simulate(text, overrides)
    doc = chrome_trace(trace, end_ns(output))
    try:
        with open(out_path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
    except OSError as e:
        raise click.BadParameter(f"cannot write {out_path}: {e.strerror}", param_hint="'-o'") from None
    click.echo(f"wrote {out_path}: {len(doc['traceEvents'])} events, {output['duration_s']:g} s simulated")


@main.command()
@click.argument("target")
@set_option
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Directory for index.html.")
@click.option("--window-ms", type=click.FloatRange(min=0, min_open=True), help="Time plots of a scenario: this much from the start (default: 10 periods).")
def report(target: str, overrides: tuple[str, ...], out_dir: str, window_ms: Optional[float]) -> None:
    """Write DIR/index.html (figures embedded) for TARGET: a scenario (built-in or
    file) or a reproduce experiment (ugedal-table2, chiluk-fibtest, turner-soakers).
    An experiment's name wins over the built-in scenario of the same name; give
    the scenario's file path to report the scenario itself."""
    from throttlelab import report as reports  # matplotlib: only for this command

    if target in experiments.EXPERIMENTS:
        if overrides or window_ms is not None:
            raise click.UsageError(f"--set and --window-ms apply to scenarios, not to the experiment {target}")
        experiment = experiments.get(target)
        progress = Progress(
            TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
            console=Console(stderr=True), transient=True,
        )
        with progress:
            task = progress.add_task(target, total=experiments.run_count(experiment))
            page = reports.experiment_page(experiment, lambda: progress.advance(task))
    else:
        text, _ = load_scenario_text(target)
        page = reports.scenario_page(text, overrides, window_ms)
    try:
        path = reports.write(out_dir, page)
    except OSError as e:
        raise click.BadParameter(f"cannot write {out_dir}: {e.strerror}", param_hint="'--out'") from None
    click.echo(f"wrote {path}")


def _progress() -> Progress:
    """A transient progress bar on stderr, so that stdout stays the result; none when
    stderr is not a terminal (where the bar would leave an empty line before an error)."""
    console = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal,
    )


@main.command()
@click.argument("scenario")
@click.option("--grid", "grids", multiple=True, required=True, metavar="KEY=V1,V2,...", help="Values of one key, in TOML syntax (repeatable; runs the cross product).")
@set_option
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True, help="A process pool on this machine, or Ray.")
@click.option("--address", help="Ray cluster to run on (with --executor ray); default: a local Ray instance.")
@click.option("--workers", type=click.IntRange(min=1), help="Processes, or CPUs of the local Ray instance (default: every core).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as a JSON list.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, allow_dash=True), help="Write the rows as CSV to FILE ('-': stdout).")
def sweep(
    scenario: str, grids: tuple[str, ...], overrides: tuple[str, ...], executor: str,
    address: Optional[str], workers: Optional[int], as_json: bool, csv_path: Optional[str],
) -> None:
    """Run SCENARIO once per combination of the --grid values: one row per run, the
    grid values and every cgroup and task metric (identical under both executors)."""
    if as_json and csv_path:
        raise click.UsageError("give --json or --csv, not both")
    grid: dict[str, list[Any]] = {}
    for spec in grids:
        key, values = parse_grid(spec)
        if key in grid:
            raise SweepError(f"--grid {key} given twice")
        grid[key] = values
    text, _ = load_scenario_text(scenario)
    with _progress() as progress:
        bar = progress.add_task("sweep", total=math.prod(len(values) for values in grid.values()))
        rows = sweep_rows(text, grid, overrides, executor, address, workers, lambda: progress.advance(bar))
    if as_json:
        click.echo(json.dumps(rows))
    elif csv_path:
        _write_csv(csv_path, rows)
    else:
        _print_sweep(list(grid), rows)


def _write_csv(path: str, rows: list[dict[str, Any]]) -> None:
    import csv

    try:
        with click.open_file(path, "w", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    except OSError as e:
        raise click.BadParameter(f"cannot write {path}: {e.strerror}", param_hint="'--csv'") from None
    if path != "-":
        click.echo(f"wrote {path}: {len(rows)} rows")


def _print_sweep(keys: list[str], rows: list[dict[str, Any]]) -> None:
    """The grid columns and, per cgroup, throttled % and throttled s; per service, p99."""
    metrics = []  # (column key, header, format)
    for col in rows[0]:
        name = col.split(".")[1] if "." in col else col
        if col.startswith("cgroup.") and col.endswith(".throttled_ratio"):
            metrics.append((col, f"{name} throttled %", lambda v: f"{100 * v:.1f}"))
        elif col.startswith("cgroup.") and col.endswith(".throttled_usec"):
            metrics.append((col, f"{name} throttled s", _seconds))
        elif col.startswith("task.") and col.endswith(".latency_p99_us"):
            metrics.append((col, f"{name} p99 ms", _millis))
    table = _table(f"sweep: {len(rows)} runs")
    for key in keys:  # cgroup.app.quota_us -> app.quota_us
        table.add_column(key.split(".", 1)[1] if key.count(".") > 1 else key, justify="right")
    for _, header, _ in metrics:
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(*(str(row[k]) for k in keys), *(fmt(row[col]) for col, _, fmt in metrics))
    _console().print(table)


@main.command()
@click.argument("scenario")
@click.option("--cgroup", required=True, help="The cgroup whose cpu.max to choose.")
@click.option("--max-throttled", type=click.FloatRange(0, 1), required=True, help="Largest throttled ratio (of periods) allowed, e.g. 0.05.")
@click.option("--max-p99-ms", type=click.FloatRange(min=0, min_open=True), help="Largest p99 request latency of every service, in ms.")
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1), help="The target must hold in every one of this many seeds.")
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the recommendation and every candidate as JSON.")
def advise(
    scenario: str, cgroup: str, max_throttled: float, max_p99_ms: Optional[float], seeds: int,
    overrides: tuple[str, ...], as_json: bool,
) -> None:
    """Find the smallest cpu.max (quota, period, burst) for CGROUP of SCENARIO that
    keeps it throttled at most --max-throttled (and services' p99 within
    --max-p99-ms) in every seed, or say that the limit should go."""
    text, _ = load_scenario_text(scenario)
    with _progress() as progress:
        bar = progress.add_task("advise", total=None)
        result = advise_text(
            text, cgroup, max_throttled, max_p99_ms, seeds, overrides,
            step=lambda: progress.advance(bar), on_total=lambda n: progress.update(bar, total=n),
        )
    if as_json:
        click.echo(json.dumps(result))
        return
    _print_advice(result)


#: Candidates shown beside the recommendation.
ADVISE_SHOWN = 6


def _print_advice(result: dict[str, Any]) -> None:
    console = _console()
    console.print(explain(result))
    with_p99 = "p99_ms" in result["unlimited"]
    holdout = result["holdout_seeds"]
    table = _table(
        f"options for {result['target']['cgroup']}: worst of seeds 1-{result['target']['seeds']};"
        f" holdout: +{100 * result['headroom']:g} % quota in seeds {holdout[0]}-{holdout[-1]} ({result['runs']} runs)"
    )
    cols = ["cpu.max", "burst", "CPUs", "throttled %"] + (["p99 ms"] if with_p99 else [])
    cols += ["meets", "holdout"]
    for col in cols:
        table.add_column(col, justify="right" if col in ("burst", "CPUs", "throttled %", "p99 ms") else "left")

    def add(limit: str, burst: str, cpus: str, outcome: dict[str, Any], checked: str) -> None:
        p99 = [f"{outcome['p99_ms']:.1f}"] if with_p99 else []
        meets = "yes" if outcome["meets"] else "no"
        table.add_row(limit, burst, cpus, f"{100 * outcome['throttled_ratio']:.1f}", *p99, meets, checked)

    for c in result["candidates"][:ADVISE_SHOWN]:
        checked = {True: "yes: recommended", False: "no"}.get(c.get("holdout_meets"), "")
        add(f"{c['quota_us']} {c['period_us']}", str(c["burst_us"] or "-"), f"{c['cpus']:.2f}", c, checked)
    unlimited = result["unlimited"]
    add("max (remove the limit)", "-", f"{unlimited['usage_cpus']:.2f} used", unlimited, "")
    console.print(table)
