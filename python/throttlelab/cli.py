"""The ``throttlelab`` command line: run (simulate), real (measure on the host kernel),
validate, list and benchmark scenarios."""

from __future__ import annotations

import json
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

DEFAULT_SCENARIO = "ugedal-table2"

#: Errors that are the user's input, not a bug: reported in one line, exit code 2.
USER_ERRORS = (_native.ScenarioError, _native.HarnessError, ScenarioNotFound, experiments.UnknownExperiment)


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
            _fail(str(e), 2)
        except _native.Interrupted as e:
            _fail(str(e), 130)
        except click.Abort:
            _fail("interrupted", 130)
        # Without standalone mode click returns the exit code of --help and the like.
        sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str, code: int) -> None:
    click.echo(f"throttlelab: error: {message}", err=True)
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
    console = Console()
    host = result["host"]
    console.print(
        f"[bold]{result['scenario']}[/bold]  {result['runs']} runs  host {host['release']}"
        f" HZ={host['hz']} cgroup {host['cgroup']}  simulator: {' '.join(result['sim_overrides'])}"
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
    console = Console()
    console.print(
        f"[bold]{doc['scenario']}[/bold]  backend {doc['backend']}  profile {doc['profile']}"
        f"  seed {doc['seed']}  duration {doc['duration_s']:g} s"
    )
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
    with_latency = any("latency_us" in t for t in tasks.values())
    table = _table("tasks")
    cols = ["task", "threads", "cpu s", "work s", "finished s"]
    cols += ["p50 ms", "p99 ms"] if with_latency else []
    for col in cols:
        table.add_column(col, justify="left" if col == "task" else "right")
    for name, t in tasks.items():
        row = [name, str(t["threads"]), _seconds(t["cpu_usec"]), _seconds(t["work_usec"])]
        row.append("-" if t["finished_s"] is None else f"{t['finished_s']:.3f}")
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
        console.print(f"host: {host['release']}, CONFIG_HZ {hz}, cgroup {host['cgroup']}")


def _table(title: str) -> Table:
    """A compact table, so that a report fits in 80 columns."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)


def _seconds(usec: int) -> str:
    return f"{usec / 1e6:.3f}"


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
    Console().print(table)


@main.command()
@click.argument("name", required=False)
@click.option("--all", "run_all", is_flag=True, help="Run every experiment.")
@click.option("--json", "as_json", is_flag=True, help="Print the experiments and their rows as JSON.")
def reproduce(name: Optional[str], run_all: bool, as_json: bool) -> None:
    """Run the seed papers' experiment NAME and set our figures beside the paper's.

    Experiments: ugedal-table2, chiluk-fibtest, turner-soakers."""
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
    console = Console() if Console().is_terminal else Console(width=120)
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
