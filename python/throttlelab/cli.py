"""The ``throttlelab`` command line: run (simulate), real (measure on the host kernel),
validate, list and benchmark scenarios."""

from __future__ import annotations

import functools
import json
import math
import os
import signal
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

import click

from throttlelab import _native, bench as benches, compare as comparison, output, vm
from throttlelab.background import Assumed, like_host_option, set_up as background_set_up
from throttlelab.acceptance import AcceptanceError
from throttlelab.acceptance.cgroup import LockHeld
from throttlelab.cgroups import CgroupError
from throttlelab import reproduce as experiments
from throttlelab import diff as differential
from throttlelab import kubelet_cgroups, prometheus_cli
from throttlelab.prometheus import PrometheusError
from throttlelab.platforms import PLATFORMS
from throttlelab.runner import EXECUTORS, Interrupted, RunFailed, Runner, RunnerError, interruptible
from throttlelab.scenarios import ScenarioNotFound, builtin_names, description, load_scenario_text
from throttlelab.terminal import Terminal, did_you_mean
from throttlelab.worker import WORKER
# Modules named like the package's functions throttlelab.sweep and throttlelab.advise: import from them.
from throttlelab.advise import EXIT_UNMET, AdviseError, advise_text
from throttlelab.explain import DEFAULT_RUNS as EXPLAIN_RUNS, ExplainError, explain_text
from throttlelab.explain import render as render_explanation
from throttlelab.advise import render as render_advice
from throttlelab.sweep import CsvOut, SweepError, flatten, parse_grid, sweep_runs
from throttlelab.sweep import render as render_sweep

DEFAULT_SCENARIO = "ugedal-table2"

#: Errors that are the user's input, not a bug: reported in one line, exit code 2.
USER_ERRORS = (
    _native.ScenarioError, _native.HarnessError, ScenarioNotFound, experiments.UnknownExperiment,
    SweepError, AdviseError, ExplainError, RunnerError, vm.VmError, AcceptanceError, LockHeld,
    differential.DiffError, PrometheusError, CgroupError,
)


#: Exit codes: 0 ok, 2 bad input (or a refusal of the real backend), 3 a bug
#: (a panic in the Rust core), 128 + the signal's number when a signal ended a
#: real run or a sweep (130 SIGINT, 143 SIGTERM, 129 SIGHUP, 131 SIGQUIT) or
#: killed a simulation's worker on every try (137 SIGKILL); advise has its own 1.
EXIT_INPUT, EXIT_INTERNAL, EXIT_SIGINT = 2, 3, 130


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
            _fail(str(e), 128 + e.signal)
        except RunFailed as e:  # a worker killed again and again (the OOM killer?)
            _fail(str(e), 128 + e.signal if e.signal else EXIT_INTERNAL)
        except click.Abort:
            _fail("interrupted", EXIT_SIGINT)
        except OSError as e:  # the output on a full disk (ENOSPC), a pipe closed (EPIPE): one line
            # Python flushes stdout again at exit: let that go nowhere, not into a second error.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            _fail(f"cannot write the output: {e.strerror or e}", EXIT_INPUT)
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
@like_host_option
@click.option("--json", "as_json", is_flag=True, help="Print the output document as JSON.")
def run(scenario: str, overrides: tuple[str, ...], like_host: bool, as_json: bool) -> None:
    """Simulate SCENARIO (a built-in name or a TOML file; default ugedal-table2)."""
    text, _ = load_scenario_text(scenario)
    settings, background = background_set_up(text, overrides, like_host)
    _emit(_native.run(text, settings), as_json, background)


def kernel_options(command: Any) -> Any:
    """``--kernel``, ``--accel`` and ``--cgroup``: run on another kernel, booted
    under QEMU; the command gets ``on``, a ``compare.KernelRun`` (None: the host)."""
    @functools.wraps(command)
    def with_kernel(*args: Any, kernel: Optional[str], accel: Optional[str], cgroup_version: Optional[str],
                    **kwargs: Any) -> Any:
        if kernel is None and (accel or cgroup_version):
            raise click.UsageError("--accel and --cgroup need --kernel")
        if kernel is None:
            return command(*args, on=None, **kwargs)
        note = Terminal().note
        return command(*args, on=vm.runner(vm.kernel(kernel, note), accel or "auto", cgroup_version or "v2", note), **kwargs)

    for option in reversed((
        click.option("--kernel", metavar="RELEASE|PATH", help="Boot this kernel with QEMU and run there: a release of Debian's (6.1, 6.12), fetched once, or a kernel image (bzImage)."),
        click.option("--accel", type=click.Choice(vm.ACCELS), help="With --kernel: QEMU's accelerator (default auto: KVM where it boots the kernel, TCG otherwise)."),
        click.option("--cgroup", "cgroup_version", type=click.Choice(vm.CGROUP_VERSIONS), help="With --kernel: the guest's cgroup hierarchy (default v2)."),
    )):
        with_kernel = option(with_kernel)
    return with_kernel


@main.command()
@click.argument("scenario")
@set_option
@kernel_options
@click.option("--json", "as_json", is_flag=True, help="Print the output document as JSON.")
def real(scenario: str, overrides: tuple[str, ...], on: Optional[comparison.KernelRun], as_json: bool) -> None:
    """Run SCENARIO on the host kernel in real cgroups and read cpu.stat (needs root).

    The cgroups live under one parent, throttlelab-<pid>, removed at the end, on
    error and on Ctrl-C. THROTTLELAB_CGROUP_ROOT overrides where the cgroup
    hierarchies are mounted (default /sys/fs/cgroup).

    With --kernel the run happens in a VM that boots that kernel (see
    docs/vm.md); host.vm in the output says which kernel and accelerator."""
    text, _ = load_scenario_text(scenario)
    _emit(next(iter(on(text, [overrides], 0.0))) if on else _native.real(text, list(overrides), WORKER), as_json)


class Seconds(click.ParamType):
    """A time > 0 in seconds, written ``2``, ``2s`` or ``500ms``."""

    name = "seconds"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        number, scale = (text[:-2], 1e-3) if text.endswith("ms") else (text[:-1], 1.0) if text.endswith("s") else (text, 1.0)
        try:
            seconds = float(number) * scale
        except ValueError:
            self.fail(f"{value!r} is not a time (e.g. 2, 2s or 500ms)", param, ctx)
        if not (seconds > 0 and math.isfinite(seconds)):
            self.fail(f"{value!r} is not a time > 0", param, ctx)
        return seconds


@main.command(epilog="Exit codes: 0 captured (a Ctrl-C, SIGINT, ends the capture early and keeps it); "
                     "128 + the signal's number when SIGTERM (143), SIGHUP (129) or SIGQUIT (131) ended it, "
                     "after writing what was captured; 2 bad input, a refusal, lost events with --strict, or an output "
                     "directory that could not take the capture (a full disk: it is kept in $TMPDIR, /var/tmp or /dev/shm, "
                     "and the line says where).")
@click.option("--cgroup", "cgroup", metavar="PATH", help="The cgroup's directory (or its path below the hierarchy's root).")
@click.option("--pod-uid", metavar="UID", help="A Kubernetes pod's container, its cgroup found as the kubelet lays it out (on the pod's node): the pod's only container besides its sandbox, or --container's.")
@click.option("--container", metavar="NAME|ID", help="With --pod-uid: which container, by an id prefix (12+ hex digits) or by name (asked of the runtime through crictl).")
@click.option("--container-id", metavar="ID", help="A Kubernetes container by its id (or a prefix of 12+ hex digits), in whichever pod it is.")
@click.option("--pid", "pids", multiple=True, type=click.IntRange(min=1), metavar="PID", help="A process to capture, with its threads (repeatable); the cgroup is the first's.")
@click.option("--children", is_flag=True, help="With --pid: the processes' descendants too.")
@click.option("--duration", "duration_s", type=Seconds(), metavar="TIME", help="How long to capture: 2, 2s or 500ms [default: until Ctrl-C].")
@click.option("--buffer-kb", type=click.IntRange(min=4), metavar="KB", help="The kernel's trace buffer per CPU, KiB [default: 8192, at most 64 MiB in all].")
@click.option("--strict", is_flag=True, help="Fail if the kernel lost trace events (default: warn, and keep the capture).")
@click.option("-o", "--out", "out_path", required=True, metavar="FILE.toml", help="The scenario to write; the phases go beside it (FILE.phases.gz).")
def capture(cgroup: Optional[str], pod_uid: Optional[str], container: Optional[str], container_id: Optional[str], pids: tuple[int, ...],
            children: bool, duration_s: Optional[float], buffer_kb: Optional[int], strict: bool, out_path: str) -> None:
    """Record what a cgroup's or some processes' threads do, from the kernel's
    scheduler events and epoll_wait's (tracefs; root), as a scenario the
    simulator replays: CPU bursts, timed sleeps, requests from outside at
    their time (wake-ups, and those an event loop takes up without sleeping),
    and wake-ups between the threads. [capture] in it holds the cgroup's
    cpu.stat over the capture, to compare with `throttlelab run FILE.toml`,
    and the trace events the kernel lost (warned about; see docs/capture.md)."""
    kubernetes = pod_uid is not None or container_id is not None or container is not None
    if sum((cgroup is not None, bool(pids), kubernetes)) != 1:
        raise click.UsageError("give --cgroup PATH, --pid PID or --pod-uid UID / --container-id ID (one of them)")
    if children and not pids:
        raise click.UsageError("--children goes with --pid")
    if kubernetes:
        _, cgroup = kubelet_cgroups.resolve(pod_uid, container, container_id)
    spec = json.loads(_native.capture(out_path, duration_s, cgroup, list(pids), children, buffer_kb, strict))
    usage = "" if spec.get("usage_usec") is None else f", usage {spec['usage_usec'] / 1e6:.3f} s"
    lost = f", {spec['lost_events']} trace events lost" if spec["lost_events"] else ""
    kept = spec.get("kept_elsewhere")
    click.echo(f"{kept['scenario'] if kept else out_path}: {spec['threads']} threads over {spec['duration_s']:.3f} s{usage}, "
               f"throttled {spec['nr_throttled']} of {spec['nr_periods']} periods ({spec['throttled_usec'] / 1e3:.1f} ms){lost}")
    if kept:  # a full disk: the capture went to a spare directory rather than be lost
        raise click.UsageError(f"{kept['cause']}; the capture is kept in {kept['scenario']} "
                         "(its phases beside it): move both where you want them")
    signal = spec.get("signal")
    if signal is not None and signal != 2:  # SIGINT is how a capture is meant to end: 0
        sys.exit(128 + signal)


def _emit(out: str, as_json: bool, background: Optional[Assumed] = None) -> None:
    """Print an output document: exactly the native JSON (byte-for-byte
    reproducible for a seed), or as tables (and the simulator's background)."""
    if as_json:
        click.echo(out)
    else:
        Terminal().print(*output.render(json.loads(out)))
        if background:
            click.echo(background.line())


@main.command()
@click.argument("scenario")
@set_option
@click.option("--runs", default=comparison.DEFAULT_RUNS, show_default=True, type=click.IntRange(min=1),
              help="Kernel runs, and simulator seeds (below 4, the test cannot tell: a row reads \"too few runs to tell\").")
@click.option("--paired", is_flag=True, help="Diagnostic: start each simulator run, with its period timers, where its kernel run was.")
@kernel_options
@click.option("--json", "as_json", is_flag=True, help="Print the comparison (with every run) as JSON.")
def compare(scenario: str, overrides: tuple[str, ...], runs: int, paired: bool, on: Optional[comparison.KernelRun],
            as_json: bool) -> None:
    """Run SCENARIO on the host kernel and in the simulator, side by side (needs root).

    The simulator gets the kernel's CONFIG_HZ, the profile of its release and its
    background, and draws its own timer phases (unless --paired); the verdict
    says whether the simulator's seeds and the kernel's runs could come from one
    distribution (Mann-Whitney U, 5 %). With --kernel the kernel runs boot that
    kernel under QEMU (docs/vm.md)."""
    text, _ = load_scenario_text(scenario)
    terminal = Terminal()
    with terminal.progress() as progress:
        bar = progress.add_task("compare", total=2 * runs)
        step = lambda label: progress.update(bar, advance=1, description=label)  # noqa: E731
        result = comparison.compare(text, overrides, runs, step, paired=paired, on=on)
    if as_json:
        click.echo(json.dumps(result))
        return
    terminal.print(*comparison.render(result))


@main.command("diff")
@click.argument("scenario")
@set_option
@click.option("--kernel", default="host", show_default=True, metavar="RELEASE|PATH|host", help="The kernel traced: the host's, or one booted with QEMU (a release of Debian's, 6.1 or 6.12, or a bzImage), whose kprobes see every bandwidth function.")
@click.option("--accel", type=click.Choice(vm.ACCELS), help="With --kernel RELEASE|PATH: QEMU's accelerator (default auto).")
@click.option("--runs", default=1, show_default=True, type=click.IntRange(min=1), help="Kernel runs, each with a simulator run paired to it.")
@click.option("--tolerance-us", default=differential.TOLERANCE_US, show_default=True, type=click.FloatRange(min=0), help="Events alike when their times from the period's start, and the runtime they move, differ by at most this.")
@click.option("-o", "--out", "out_dir", metavar="DIR", help="Write one Perfetto trace per run (kernel and simulator side by side) and diff.json there.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def diff_cmd(scenario: str, overrides: tuple[str, ...], kernel: str, accel: Optional[str], runs: int, tolerance_us: float,
             out_dir: Optional[str], as_json: bool) -> None:
    """Trace bandwidth control event by event on a kernel and in the simulator
    paired to each run, and show where they first diverge (needs root).

    Compared per period (cut at the period timer's expiries) and per CPU:
    refills, grants of runtime, slack returns, throttle and unthrottle,
    distribution and the slack timer, as far as the kernel's source sees them
    (docs/diff.md): the host's tracepoints, or a guest's kprobes."""
    if accel and kernel == "host":
        raise click.UsageError("--accel needs --kernel RELEASE|PATH")
    text, _ = load_scenario_text(scenario)
    terminal = Terminal()
    on = None if kernel == "host" else differential.vm_traced_runs(vm.kernel(kernel, terminal.note), accel or "auto", terminal.note)
    with terminal.progress() as progress:
        bar = progress.add_task("diff", total=2 * runs)
        step = lambda label: progress.update(bar, advance=1, description=label)  # noqa: E731
        result = differential.diff(text, overrides, runs, on, tolerance_us, step=step)
    if out_dir:
        cpus = json.loads(_native.validate(text, list(overrides)))["machine"]["cpus"]
        for path in differential.write_perfetto(Path(out_dir), result, cpus):
            terminal.note(f"wrote {path}")
    if as_json:
        click.echo(json.dumps(differential.serialisable(result)))
        return
    terminal.print(*differential.render(result))


@main.group(invoke_without_command=True)
@click.pass_context
def scenarios(ctx: click.Context) -> None:
    """List the built-in scenarios (``scenarios show NAME`` prints one)."""
    if ctx.invoked_subcommand is None:
        for name in builtin_names():
            click.echo(f"{name}  {description(load_scenario_text(name)[0])}")


@scenarios.command("show")
@click.argument("name")
def scenarios_show(name: str) -> None:
    """Print built-in scenario NAME's TOML, or the scenario an rt-app workload
    (a .json file) becomes, to copy and change."""
    if name not in builtin_names() and not name.endswith(".json"):
        raise ScenarioNotFound(f"no built-in scenario '{name}'; {did_you_mean(name, builtin_names(), 'built-ins')}")
    click.echo(load_scenario_text(name)[0], nl=False)


@main.command()
@click.argument("scenario")
@set_option
def validate(scenario: str, overrides: tuple[str, ...]) -> None:
    """Check SCENARIO (a TOML file, an rt-app .json or a built-in name) without simulating it."""
    text, _ = load_scenario_text(scenario)
    resolved = json.loads(_native.validate(text, list(overrides)))
    click.echo(f"ok: {resolved['name']} ({len(resolved['cgroups'])} cgroups, {len(resolved['tasks'])} tasks)")


@main.command()
@click.argument("names", nargs=-1)
@click.option("--runs", "repeat", default=1, show_default=True, type=click.IntRange(min=1), help="Runs per scenario; the fastest counts.")
@click.option("--json", "as_json", is_flag=True, help="Print the records as a JSON list.")
def bench(names: tuple[str, ...], repeat: int, as_json: bool) -> None:
    """Time built-in scenarios NAMES (default: all of them)."""
    names = names or tuple(builtin_names())
    for name in names:  # fail on a bad name before spending time on the others
        load_scenario_text(name)
    records = []
    terminal = Terminal()
    with terminal.progress() as progress:
        task = progress.add_task("bench", total=len(names))
        for name in names:
            progress.update(task, description=name)
            records.append(benches.measure(name, repeat))
            progress.advance(task)
    if as_json:
        click.echo(json.dumps(records))
        return
    terminal.print(benches.render(records, repeat))


@main.command(epilog=f"Experiments: {', '.join(experiments.EXPERIMENTS)}.")
@click.argument("name", required=False)
@click.option("--all", "run_all", is_flag=True, help="Run every experiment.")
@click.option("--json", "as_json", is_flag=True, help="Print the experiments and their rows as JSON.")
def reproduce(name: Optional[str], run_all: bool, as_json: bool) -> None:
    """Run the seed papers' experiment NAME and set our figures beside the paper's."""
    if (name is not None) == run_all:
        raise click.UsageError(f"give one experiment or --all ({', '.join(experiments.EXPERIMENTS)})")
    chosen = list(experiments.EXPERIMENTS.values()) if run_all else [experiments.get(name)]
    terminal = Terminal()
    with terminal.progress() as progress:
        task = progress.add_task("reproduce --all" if run_all else chosen[0].name, total=sum(experiments.run_count(e) for e in chosen))
        docs = experiments.reproduce_all(chosen, lambda: progress.advance(task))
    if as_json:
        click.echo(json.dumps(docs))
        return
    for doc in docs:
        terminal.print(experiments.render(doc))


#: Simulated seconds ``trace`` keeps unless --to-s says otherwise: the whole run of
#: every built-in with a fixed duration. Runs that go on are cut there (saying so on
#: stderr): 60 s of a 4-CPU run is a few MB of JSON, hours of it no viewer opens.
DEFAULT_TRACE_S = 60.0


@main.command("trace")
@click.argument("scenario")
@set_option
@click.option("--from-s", type=click.FloatRange(min=0), default=0.0, show_default=True, help="Trace from this simulated second (the run still starts at 0).")
@click.option("--to-s", type=click.FloatRange(min=0), help=f"Trace up to this simulated second, where the run stops [default: --from-s + {DEFAULT_TRACE_S:g}].")
@click.option("-o", "--out", "out_path", default="trace.json", show_default=True, type=click.Path(dir_okay=False, writable=True), help="Where to write the trace.")
def trace_cmd(scenario: str, overrides: tuple[str, ...], from_s: float, to_s: Optional[float], out_path: str) -> None:
    """Simulate SCENARIO and write a Chrome/Perfetto JSON trace of [--from-s, --to-s] (open
    it in ui.perfetto.dev): CPU tracks with task and throttled slices, runtime pools as
    counters, refills as instants. Written as the simulation runs; progress on stderr."""
    from throttlelab.perfetto import chrome_events, write_json
    from throttlelab.timeline import TracedRun, end_ns, limited_groups

    cut = to_s is None
    to_s = from_s + DEFAULT_TRACE_S if to_s is None else to_s
    if to_s <= from_s:
        raise click.UsageError(f"empty window: --to-s {to_s:g} is not after --from-s {from_s:g}")
    text, _ = load_scenario_text(scenario)
    resolved = json.loads(_native.validate(text, list(overrides)))
    if (resolved["duration_s"] or math.inf) <= from_s:  # known before running: say so at once
        raise _ends_before(resolved["duration_s"], from_s)
    from_ns, to_ns = round(from_s * 1e9), round(to_s * 1e9)
    try:
        with open(out_path, "w", encoding="utf-8") as f, Terminal().progress() as progress:
            run = TracedRun(text, overrides, from_ns, to_ns)
            bar = progress.add_task("trace: simulated s", total=min(to_s, resolved["duration_s"] or to_s))
            events = write_json(f, chrome_events(_progressing(run, progress, bar), limited_groups(resolved), from_ns))
    except OSError as e:
        raise click.BadParameter(f"cannot write {out_path}: {e.strerror}", param_hint="'-o'") from None
    ran_ns = end_ns(run.output())
    ran_s = ran_ns / 1e9
    if ran_ns <= from_ns:
        os.remove(out_path)
        raise _ends_before(ran_s, from_s)
    if cut and ran_ns == to_ns and (resolved["duration_s"] or math.inf) > to_s:
        click.echo(f"throttlelab: the run goes on after {to_s:g} s; the trace stops there (--to-s widens it)", err=True)
    click.echo(f"wrote {out_path}: {events} events, {from_s:g}-{ran_s:g} s of simulated time")


def _ends_before(ran_s: float, from_s: float) -> click.UsageError:
    return click.UsageError(f"the run ends at {ran_s:g} s, before --from-s {from_s:g}")


def _progressing(chunks: Iterable[tuple[int, Any]], progress: Any, bar: int) -> Iterator[tuple[int, Any]]:
    """The chunks of a traced run, moving ``bar`` to the simulated second each reaches."""
    for now_ns, chunk in chunks:
        progress.update(bar, completed=round(now_ns / 1e9, 1))
        yield now_ns, chunk


@main.command()
@click.argument("target", required=False)
@set_option
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Directory for index.html.")
@click.option("--window-ms", type=click.FloatRange(min=0, min_open=True), help="Time plots of a scenario: this much from the start (default: 10 periods).")
@prometheus_cli.report_options
def report(target: Optional[str], overrides: tuple[str, ...], out_dir: str, window_ms: Optional[float], **prometheus: Any) -> None:
    """Write DIR/index.html (figures embedded) for TARGET: a scenario (built-in or
    file) or a reproduce experiment (ugedal-table2, chiluk-fibtest, turner-soakers).
    An experiment's name wins over the built-in scenario of the same name; give
    the scenario's file path to report the scenario itself. With --prometheus URL
    instead: advise --prometheus's fleet, each container's usage over time."""
    from throttlelab import report as reports  # matplotlib: only for this command

    if prometheus["prometheus"] is not None:
        page = prometheus_cli.report_command(target, overrides, out_dir, window_ms, **prometheus)
    elif target is None:
        raise click.UsageError("report needs TARGET (or --prometheus URL)")
    elif target in experiments.EXPERIMENTS:
        if overrides or window_ms is not None:
            raise click.UsageError(f"--set and --window-ms apply to scenarios, not to the experiment {target}")
        experiment = experiments.get(target)
        with Terminal().progress() as progress:
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


@main.command()
@click.argument("scenario")
@click.option("--grid", "grids", multiple=True, required=True, metavar="KEY=V1,V2,...", help="Values of one key, in TOML syntax (repeatable; runs the cross product).")
@set_option
@like_host_option
@click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True, help="A process pool on this machine, or Ray.")
@click.option("--address", help="Ray cluster to run on (with --executor ray); default: a local Ray instance.")
@click.option("--workers", type=click.IntRange(min=1), help="Processes, or CPUs of the local Ray instance (default: every core).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as a JSON list.")
@click.option("-o", "--out", "csv_path", type=click.Path(dir_okay=False, allow_dash=True), help="Write the rows as CSV to FILE ('-': stdout), each as its run finishes.")
@click.option("--resume", is_flag=True, help="With --out FILE: keep the rows FILE holds and run only the others.")
def sweep(
    scenario: str, grids: tuple[str, ...], overrides: tuple[str, ...], like_host: bool, executor: str,
    address: Optional[str], workers: Optional[int], as_json: bool, csv_path: Optional[str], resume: bool,
) -> None:
    """Run SCENARIO once per combination of the --grid values: one row per run, the
    grid values and every cgroup and task metric (identical under both executors).
    A run whose worker died is run again (twice at most). Interrupted (Ctrl-C,
    SIGTERM, SIGHUP), it exits 128 + the signal's number; the rows --out FILE
    holds stay, and --resume runs the rest."""
    if as_json and csv_path:
        raise click.UsageError("give --json or --out, not both")
    if resume and (not csv_path or csv_path == "-"):
        raise click.UsageError("--resume needs --out FILE")
    grid: dict[str, list[Any]] = {}
    for spec in grids:
        key, values = parse_grid(spec)
        if key in grid:
            raise SweepError(f"--grid {key} given twice")
        grid[key] = values
    text, _ = load_scenario_text(scenario)
    settings, background = background_set_up(text, overrides, like_host, list(grid))
    combos, runs = sweep_runs(text, grid, settings)
    out = CsvOut(csv_path, list(grid), combos, resume) if csv_path and csv_path != "-" else None
    todo = [i for i in range(len(runs)) if out is None or i not in out.lines]
    rows: dict[int, dict[str, Any]] = {}
    terminal = Terminal()
    try:
        with terminal.progress() as progress, Runner(executor, address, workers) as runner, interruptible():
            bar = progress.add_task("sweep", total=len(runs))
            if len(todo) < len(runs):  # the rows --resume found
                progress.update(bar, completed=len(runs) - len(todo))
            for j, doc in runner.completed_runs([runs[i] for i in todo]):
                # Each row says its background, after the grid's values.
                combo = combos[todo[j]]
                rows[todo[j]] = row = {**combo, **background.columns(combo), **flatten(doc)}
                if out:
                    out.add(todo[j], row)
                progress.advance(bar)
            if out:
                out.finish()
    except Interrupted as e:
        kept = f"{out.kept()} in {csv_path}; --resume runs the rest" if out else f"{len(rows)} of {len(runs)} runs done, not kept (--out FILE keeps each row)"
        _fail(f"interrupted by {signal.Signals(e.signal).name}: {kept}", 128 + e.signal)
    if out:
        # The file's background columns say what each row assumed.
        click.echo(f"wrote {csv_path}: {len(out.lines)} rows" + (f" ({out.had} from before)" if out.had else ""))
        return
    ordered = [rows[i] for i in sorted(rows)]
    if as_json:
        click.echo(json.dumps(ordered))
    elif csv_path:
        _write_csv(csv_path, ordered)
    else:
        terminal.print(render_sweep(list(grid), ordered))
        click.echo(background.line())


def _write_csv(path: str, rows: list[dict[str, Any]]) -> None:
    import csv

    try:
        with click.open_file(path, "w", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    except OSError as e:
        raise click.BadParameter(f"cannot write {path}: {e.strerror}", param_hint="'--out'") from None
    if path != "-":
        click.echo(f"wrote {path}: {len(rows)} rows")


class Ratio(click.ParamType):
    """A ratio in 0..1, written ``0.05`` or ``5%``."""

    name = "ratio"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            ratio = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            self.fail(f"{value!r} is not a ratio (e.g. 0.05 or 5%)", param, ctx)
        if not 0 <= ratio <= 1:
            self.fail(f"{value!r} is not in 0..1 (0%..100%)", param, ctx)
        return ratio


@main.command(epilog=f"Exit codes: 0 advice given (a limit, or to remove it); {EXIT_UNMET} not even removing the limit meets the target; 2 bad input.")
@click.argument("scenario", required=False)
@click.option("--cgroup", help="The cgroup whose cpu.max to choose (with SCENARIO; default: the only limited one).")
@click.option("--max-throttled", type=Ratio(), required=True, help="Largest throttled ratio (throttled periods / periods) allowed, e.g. 0.05 or 5%.")
@click.option("--max-p99-ms", type=click.FloatRange(min=0, min_open=True), help="Largest p99 request latency of every service, in ms (with --prometheus: predicted from --latency-metric).")
@click.option("--platform", type=click.Choice(list(PLATFORMS)), default="cgroup", show_default=True, help="Search only what this platform can set and answer in its units (kubernetes: millicores at the kubelet's 100 ms period, no burst).")
@click.option("--runs", "seeds", default=3, show_default=True, type=click.IntRange(min=1), help="The target must hold in every one of this many runs (seeds 1..N; the holdout takes the next N).")
@set_option
@like_host_option
@click.option("--json", "as_json", is_flag=True, help="Print the recommendation and every candidate as JSON.")
@prometheus_cli.options
def advise(
    scenario: Optional[str], cgroup: Optional[str], max_throttled: float, max_p99_ms: Optional[float], platform: str, seeds: int,
    overrides: tuple[str, ...], like_host: bool, as_json: bool, **prometheus: Any,
) -> int:
    """Find the smallest CPU limit for CGROUP of SCENARIO that keeps it throttled at
    most --max-throttled (and services' p99 within --max-p99-ms) in every seed, or
    say that the limit should go; the scenario's current limit is shown first.
    With --prometheus URL instead: a limit for every container there (docs/prometheus.md)."""
    if prometheus["prometheus"] is not None:
        return prometheus_cli.advise_command(click.get_current_context(), scenario, cgroup, max_throttled, max_p99_ms, platform, as_json, **prometheus)
    if scenario is None:
        raise click.UsageError("advise needs SCENARIO (or --prometheus URL)")
    text, _ = load_scenario_text(scenario)
    settings, background = background_set_up(text, overrides, like_host)
    terminal = Terminal()
    with terminal.progress() as progress:
        bar = progress.add_task("advise", total=None)
        result = advise_text(
            text, cgroup, max_throttled, max_p99_ms, seeds, settings,
            step=lambda: progress.advance(bar), on_total=lambda n: progress.update(bar, total=n), platform=platform,
        )
    result["background"] = background.as_json()
    if as_json:
        click.echo(json.dumps(result))
    else:
        terminal.print(*render_advice(result))
        click.echo(background.line())
    return 0 if result["met"] else EXIT_UNMET


@main.command()
@click.argument("scenario")
@click.option("--cgroup", help="The cgroup to explain (default: the only limited one, or the most throttled).")
@click.option("--runs", "seeds", default=EXPLAIN_RUNS, show_default=True, type=click.IntRange(min=1), help="Seeds (1..N) every measurement is made on.")
@set_option
@like_host_option
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
def explain(scenario: str, cgroup: Optional[str], seeds: int, overrides: tuple[str, ...], like_host: bool, as_json: bool) -> None:
    """Say why a cgroup of SCENARIO (a scenario or a capture) is throttled, in
    numbers from simulations: its demand per period against the quota, how many
    threads run at once, what slices, ticks, the release and rewrites of cpu.max
    contribute (counterfactual runs), and what each fix would change."""
    text, _ = load_scenario_text(scenario)
    settings, background = background_set_up(text, overrides, like_host)
    terminal = Terminal()
    with terminal.progress() as progress:
        bar = progress.add_task("explain", total=None)
        result = explain_text(
            text, cgroup, settings, seeds, step=lambda: progress.advance(bar), on_total=lambda n: progress.update(bar, total=n),
        )
    result["background"] = background.as_json()
    if as_json:
        click.echo(json.dumps(result))
    else:
        terminal.print(*render_explanation(result))
        click.echo(background.line())


@main.command(epilog="Exit codes: 0 done; 1 a program failed (the others' rows stand); 2 bad input, or another real run holds the lock.")
@click.argument("programs", nargs=-1, metavar="[PROGRAM]...")
@click.option("--runs", default=5, show_default=True, type=click.IntRange(min=1), help="Kernel runs per configuration.")
@click.option("--seeds", default=20, show_default=True, type=click.IntRange(min=1), help="Simulator seeds 1..N per configuration.")
@click.option("--duration-s", default=20.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="Each kernel run's measured window, and the capture's first window the predictions replay.")
@click.option("--capture-s", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="The capture's window (one draw of an open-loop program's demand, which the replay repeats).")
@click.option("--demand-s", default=10.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="The unlimited run that measures the demand the limits are relative to.")
@click.option("--cost-runs", default=5, show_default=True, type=click.IntRange(min=0), help="Runs with and without a capture, for what it costs the program's throughput (0: skip).")
@click.option("-o", "--out", "out_dir", default=".", show_default=True, type=click.Path(file_okay=False), help="Directory for acceptance.md, acceptance.json and acceptance-captures/.")
@click.option("--work", type=click.Path(file_okay=False), help="Keep the captures and the replays made from them here (default: a temporary directory, removed).")
@click.option("--note", default="", help="A line saying how this run was made (the host's state), put in the report.")
@click.option("--rejudge", type=click.Path(dir_okay=False), metavar="JSON", help="Run no program: make a finished run's predictions again with this simulator from the acceptance-captures/ beside JSON, against its kernel runs.")
def accept(programs: tuple[str, ...], runs: int, seeds: int, duration_s: float, capture_s: float, demand_s: float,
           cost_runs: int, out_dir: str, work: Optional[str], note: str, rejudge: Optional[str]) -> int:
    """Capture each PROGRAM under one CPU limit on the host kernel (root),
    predict other limits (a tighter quota, a shorter period, burst, another
    thread count) with the simulator alone, run the program under them and
    judge each prediction: throttled ratio, usage and p99 against the runs.
    PROGRAM is a built-in (sysbench, stress-ng, apache, nginx, pgbench; all by
    default) or a FILE.py defining PROGRAM (docs/acceptance.md)."""
    import tempfile

    from throttlelab.acceptance import Options, rejudge_file, run_programs

    terminal = Terminal()
    if rejudge:
        return rejudge_file(Path(rejudge), seeds, Path(out_dir), list(programs), terminal)
    with tempfile.TemporaryDirectory(prefix="throttlelab-accept-") as temp:
        opts = Options(runs, seeds, duration_s, capture_s, demand_s, cost_runs, Path(out_dir), Path(work or temp))
        return run_programs(list(programs), opts, note, terminal)
