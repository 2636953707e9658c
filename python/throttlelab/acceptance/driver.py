"""The acceptance driver: a real program captured under one limit on the host
kernel, predicted by the simulator alone under other limits, and measured on
the kernel under those limits (docs/acceptance.md; `throttlelab accept`).

For each program: its demand, unlimited; one run under the capture limit with
`throttlelab capture` beside it; then for each target configuration (a tighter
quota, a shorter period, burst, another thread count) the simulator replays
the capture with that configuration over seeds 1..N (unpaired: a user
predicting a limit has no kernel run to pair with) and the kernel runs the
program `runs` times, each in a fresh cgroup as a container would be. Writes
acceptance.md, acceptance.json and the captures in acceptance-captures/ to
the output directory. Also measures what a capture running beside the
program costs its throughput.

`rejudge` runs no program: it makes a finished run's predictions again from
its captures with the simulator as it is now, against the same kernel runs, so
a change to the simulator shows on the published table without an idle host
and an hour.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Optional

import throttlelab
from throttlelab.acceptance import apache, nginx, pgbench
from throttlelab.acceptance.cgroup import Cgroup, run_lock
from throttlelab.acceptance.programs import LEAD_S, TAIL_S, Config, Program, StressNg, Sysbench
from throttlelab.metrics import percentile
from throttlelab.terminal import Terminal

# Beside acceptance.json: each program's capture, from which `--rejudge`
# makes the predictions again.
CAPTURES = "acceptance-captures"

# Targets (issue #16): mean throttled ratio inside the kernel's range or within
# 3 points of its mean; usage within 5 %; p99 within 25 %.
THROTTLED_POINTS = 3.0
USAGE_REL = 0.05
P99_REL = 0.25


class AcceptanceError(ValueError):
    """Bad input to the driver (an unknown program, a file that is not a
    finished run), said in one line."""


#: The built-in programs, in the order a run without names takes them.
PROGRAMS: dict[str, type[Program]] = {
    "sysbench": Sysbench, "stress-ng": StressNg, "apache": apache.Program, "nginx": nginx.Program, "pgbench": pgbench.Program,
}


def load_program(path: Path) -> type[Program]:
    """The program a user's Python file defines as ``PROGRAM`` (a class written
    to `Program`'s interface; one that does not subclass it gets its optional
    members' defaults)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise AcceptanceError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        cls = module.PROGRAM
    except Exception as e:  # noqa: BLE001 - someone else's file: say what went wrong, in one line
        raise AcceptanceError(f"{path}: no program loaded ({e!r})") from None
    return cls if issubclass(cls, Program) else type(cls.__name__, (cls, Program), {})


def resolve_programs(names: list[str]) -> dict[str, type[Program]]:
    """The programs `names` ask for (a built-in name, or a file ending in .py
    defining ``PROGRAM``), by their names; every built-in if none."""
    chosen: dict[str, type[Program]] = {}
    for name in names or list(PROGRAMS):
        if name.endswith(".py"):
            cls = load_program(Path(name))
            chosen[cls.name] = cls
        elif name in PROGRAMS:
            chosen[name] = PROGRAMS[name]
        else:
            raise AcceptanceError(f"unknown program {name!r}; built in: {', '.join(PROGRAMS)}, or a FILE.py defining PROGRAM")
    return chosen


# ---------------------------------------------------------------------------
# measuring


@dataclass
class Measured:
    """One kernel run: cpu.stat over the window and the program's figures."""

    nr_periods: int
    nr_throttled: int
    throttled_usec: int
    usage_usec: int
    window_s: float
    figures: dict[str, float]
    latencies_ms: list[float]

    @property
    def throttled_pct(self) -> float:
        return 100 * self.nr_throttled / self.nr_periods if self.nr_periods else 0.0

    @property
    def usage_cpus(self) -> float:
        return self.usage_usec / 1e6 / self.window_s


def measure(load: Callable[[Path, float], dict[str, float]], config: Config, duration_s: float, tag: str, beside: Optional[Callable[[Path], None]] = None) -> Measured:
    """Run `load(cgroup, run_s)` (a program's run) in a fresh cgroup limited as
    `config`; read cpu.stat over `duration_s` once it runs (`LEAD_S` in), with
    `beside(cgroup)` called (a capture) over that window instead of a sleep."""
    with Cgroup(f"throttlelab-accept-{tag}-{os.getpid()}", config.period_us, config.quota_us, config.burst_us) as cg:
        result: dict[str, dict] = {}
        worker = threading.Thread(target=lambda: result.setdefault("figures", load(cg.path, LEAD_S + duration_s + TAIL_S)), daemon=True)
        worker.start()
        time.sleep(LEAD_S)
        before, t0 = cg.stats(), time.monotonic()
        if beside is None:
            time.sleep(duration_s)
        else:
            beside(cg.path)
        after, window_s = cg.stats(), time.monotonic() - t0
        worker.join(duration_s + 60)
        if worker.is_alive():
            raise RuntimeError(f"{tag}: the program did not end")
        if "figures" not in result:
            raise RuntimeError(f"{tag}: the program failed (see above)")
        delta = {k: after[k] - before[k] for k in after}
        figures = result["figures"]
        return Measured(**delta, window_s=window_s, latencies_ms=figures.pop("latencies_ms", []), figures=figures)


def runner(program: Program, config: Config) -> Callable[[Path, float], dict[str, float]]:
    """`program`'s run at `config`'s thread count, as `measure` calls it."""
    return lambda cgroup, run_s: program.run(cgroup, config.threads or 0, run_s)


def capture(load: Callable[[Path, float], dict[str, float]], config: Config, duration_s: float, out: Path) -> Measured:
    """The capture run: `throttlelab capture` beside the program; its cpu.stat
    is the capture's own (`[capture]`: read between the trace marks, the
    window the simulator replays)."""

    def run_capture(cgroup: Path) -> None:
        argv = [sys.executable, "-m", "throttlelab", "capture", "--cgroup", str(cgroup), "--duration", str(duration_s), "-o", str(out)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        try:
            proc.wait()
        finally:
            # Interrupted: SIGINT lets the capture remove its tracefs instance.
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait(10)
        if proc.returncode != 0:
            raise RuntimeError(f"throttlelab capture exited {proc.returncode}")

    around = measure(load, config, duration_s, "capture", run_capture)
    spec = tomllib.loads(out.read_text())["capture"]
    fields = ("nr_periods", "nr_throttled", "throttled_usec", "usage_usec")
    return Measured(**{k: spec.get(k, getattr(around, k)) for k in fields}, window_s=spec["duration_s"], figures=around.figures, latencies_ms=around.latencies_ms)


def predict(program: Program, scenario: Path, config: Config, seeds: int, window_s: Optional[float] = None) -> list[dict]:
    """The simulator's runs of `scenario` limited as `config`, seeds 1..N,
    over its first `window_s` (all of it by default)."""
    name = tomllib.loads(scenario.read_text())["cgroup"][0]["name"]
    sets = [f"cgroup.{name}.period_us={config.period_us}", f"cgroup.{name}.quota_us={config.quota_us}", f"cgroup.{name}.burst_us={config.burst_us}"]
    sets += [f"duration_s={window_s}"] if window_s else []
    sets += ["keep_latencies=true"]  # pooled over a program's processes: request_percentiles
    outs = []
    for seed in range(1, seeds + 1):
        out = throttlelab.run(scenario, set=sets + [f"seed={seed}"])
        cg = out["cgroups"][name]
        outs.append({
            "throttled_pct": 100 * cg["throttled_ratio"],
            "usage_cpus": cg["usage_usec"] / 1e6 / out["duration_s"],
            "throttled_usec": cg["throttled_usec"],
            # When the replay's first thread ran out of phases: short of the
            # window, the capture left out time its threads spent off the CPU
            # without sleeping (runnable behind other work on the host).
            "phases_end_s": min((t["finished_s"] or out["duration_s"]) for t in out["tasks"].values()),
            **program.predicted(out),
        })
    return outs


# ---------------------------------------------------------------------------
# the report


def _mean(xs: list[float]) -> Optional[float]:
    return statistics.fmean(xs) if xs else None


def verdicts(kernel: list[dict], kernel_pooled: dict[str, float], sim: list[dict], sim_pooled: dict[str, float]) -> dict[str, Optional[bool]]:
    """Each target met or not (None: no figure to judge); p99 is the kernel's
    runs' pooled against the simulator's seeds' pooled (`pooled_percentiles`)."""
    k_thr = [r["throttled_pct"] for r in kernel]
    s_thr = _mean([r["throttled_pct"] for r in sim])
    out: dict[str, Optional[bool]] = {
        "throttled": min(k_thr) <= s_thr <= max(k_thr) or abs(s_thr - statistics.fmean(k_thr)) <= THROTTLED_POINTS,
    }
    k_use, s_use = _mean([r["usage_cpus"] for r in kernel]), _mean([r["usage_cpus"] for r in sim])
    out["usage"] = abs(s_use - k_use) <= USAGE_REL * k_use
    k_p99, s_p99 = kernel_pooled.get("p99_ms"), sim_pooled.get("p99_ms")
    out["p99"] = None if k_p99 is None or s_p99 is None else abs(s_p99 - k_p99) <= P99_REL * k_p99
    return out


def _fmt(x: Optional[float], digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _range(xs: list[float], digits: int = 1) -> str:
    return f"{_fmt(statistics.fmean(xs), digits)} [{_fmt(min(xs), digits)}-{_fmt(max(xs), digits)}]" if xs else "-"


def _pooled(row: dict, side: str, key: str) -> str:
    """A row's pooled percentile of `side` (`kernel` or `sim`) and its runs'
    or seeds' own range."""
    runs = [r[key] for r in row[side] if key in r]
    if not runs:
        return "-"
    return f"{_fmt(row[f'{side}_pooled'].get(key), 2)} [{_fmt(min(runs), 2)}-{_fmt(max(runs), 2)}]"


def _mark(ok: Optional[bool]) -> str:
    return "-" if ok is None else ("yes" if ok else "**no**")


def markdown(doc: dict) -> str:
    lines = [
        "| program | config | limit | kernel throttled % mean [min-max] | sim throttled % | ok | kernel usage CPUs | sim usage | ok "
        "| kernel p50 ms pooled [runs' min-max] | sim p50 pooled [seeds' min-max] | kernel p99 ms pooled [runs' min-max] | sim p99 pooled [seeds' min-max] | ok |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in doc["rows"]:
        k, s, v = row["kernel"], row["sim"], row["verdict"]
        col = lambda runs, key: [r[key] for r in runs if key in r]  # noqa: E731
        lines.append(
            f"| {row['program']} | {row['config']} | {row['limit']} | {_range(col(k, 'throttled_pct'))} | {_fmt(_mean(col(s, 'throttled_pct')))} "
            f"| {_mark(v['throttled'])} | {_range(col(k, 'usage_cpus'), 3)} | {_fmt(_mean(col(s, 'usage_cpus')), 3)} | {_mark(v['usage'])} "
            f"| {_pooled(row, 'kernel', 'p50_ms')} | {_pooled(row, 'sim', 'p50_ms')} | {_pooled(row, 'kernel', 'p99_ms')} | {_pooled(row, 'sim', 'p99_ms')} "
            f"| {_mark(v['p99'])} |"
        )
    lines += [
        "",
        "| program | captured threads | captured CPU ms | cpu.stat usage ms | untraced switches | window s | replay's first thread ends at s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in doc["rows"]:
        c = row["capture"]
        if row["config"] == "captured":
            end_s = _mean([r["phases_end_s"] for r in row["sim"]])
            lines.append(
                f"| {row['program']} | {c['threads']} | {c['cpu_usec'] // 1000} | {c.get('usage_usec', 0) // 1000} | {c['untraced_switches']} "
                f"| {c['duration_s']:.2f} | {_fmt(end_s, 2)} |"
            )
    lines += ["", "| program | figure | without a capture, mean [min-max] | with a capture | cost |", "|---|---|---|---|---|"]
    for c in doc["capture_cost"]:
        cost = 100 * (1 - statistics.fmean(c["with"]) / statistics.fmean(c["without"]))
        lines.append(f"| {c['program']} | {c['figure']} | {_range(c['without'])} | {_range(c['with'])} | {cost:.1f} % |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# the driver


@dataclass
class Options:
    """The command line's choices that `accept` needs."""

    runs: int
    seeds: int
    duration_s: float
    capture_s: float
    demand_s: float
    cost_runs: int
    out: Path
    work: Path


def targets(program: Program, demand_cpus: float) -> Iterator[Config]:
    """The captured configuration, then the ones predicted from its capture,
    for a program that uses `demand_cpus` unlimited."""
    t = program.threads[0] if program.threads else None
    yield program.capture_limit.config("captured", demand_cpus, t)
    yield program.tighter_limit.config("tighter quota", demand_cpus, t)
    yield program.shorter_period_limit.config("shorter period", demand_cpus, t)
    yield program.burst_limit.config("burst", demand_cpus, t)
    if program.threads:
        yield program.capture_limit.config("threads", demand_cpus, program.threads[1])


UNLIMITED = Config("unlimited", 100_000, -1, 0, None)
# The control row: the captured configuration, run again among the others.
SAME_LIMIT = "same limit"


def demand(program: Program, opts: "Options", term: Terminal) -> Measured:
    """The program's run unlimited, over `opts.demand_s`: the CPUs it uses,
    which set the limits; it also warms the program up (a server's caches,
    the host's) before its capture, as a container running for a while is."""
    term.note(f"{program.name}: its demand, unlimited, over {opts.demand_s:g} s")
    free = replace(UNLIMITED, threads=program.threads[0] if program.threads else None)
    return retried(lambda: measure(runner(program, free), free, opts.demand_s, f"{program.name}-demand"), term)


def accept(program: Program, opts: Options, term: Terminal) -> tuple[list[dict], Optional[dict]]:
    """The rows of one program, and what a capture costs its throughput. The
    kernel runs go round the configurations (run 1 of each, then run 2, ...),
    so that a host whose speed drifts over the program's runs moves every row
    alike, and the capture is taken among them (after the first half of the
    rounds) for the same reason: the predictions see the capture alone, and
    it is one draw of the program's cost, which on this host drifts by a few
    per cent over a program's runs (docs/acceptance.md). The *same limit*
    row runs the captured configuration again among them, a control: its
    prediction is the capture's own replay, so a miss there is the host or
    the program moving from the capture, not a prediction. Every run draws
    the capture's traffic (`TRAFFIC_SEED`), so a run's window holds the
    capture's first `duration_s`, which the predictions replay; the captured
    row replays all of the capture against the capture run itself."""
    unlimited = demand(program, opts, term)
    configs = list(targets(program, unlimited.usage_cpus))
    scenario = opts.work / f"{program.name}.toml"
    measured = [replace(configs[0], name=SAME_LIMIT)] + configs[1:]
    kernel: dict[str, list[Measured]] = {}
    for i in range(opts.runs):
        if i == opts.runs // 2:
            term.note(f"{program.name}: capture under {configs[0].label()}")
            captured = retried(lambda: capture(runner(program, configs[0]), configs[0], opts.capture_s, scenario), term)
        for config in measured:
            term.note(f"{program.name}: kernel run {i + 1}/{opts.runs}: {config.name} ({config.label()})")
            run = retried(lambda: measure(runner(program, config), config, opts.duration_s, f"{program.name}-{i}"), term)
            kernel.setdefault(config.name, []).append(run)
    sims = predictions(program, scenario, [configs[0], *measured], opts, term)
    kernel["captured"] = [captured]
    about = {
        "capture": tomllib.loads(scenario.read_text())["capture"],
        "demand": {"usage_cpus": unlimited.usage_cpus, "window_s": unlimited.window_s, **unlimited.figures},
    }
    runs = {
        name: [{"throttled_pct": m.throttled_pct, "usage_cpus": m.usage_cpus, "throttled_usec": m.throttled_usec, **m.figures} for m in ms]
        for name, ms in kernel.items()
    }
    pooled = {name: pooled_percentiles([m.latencies_ms for m in ms]) for name, ms in kernel.items()}
    return judged(program, [configs[0], *measured], runs, pooled, sims, about), capture_cost(program, opts, term)


def predictions(program: Program, scenario: Path, configs: list[Config], opts: Options, term: Terminal) -> dict[str, list[dict]]:
    """The simulator's seeds for each of `configs` from the capture `scenario`
    alone: the captured row replays all of it, the others its first
    `duration_s` (a kernel run's window)."""
    sims = {}
    for config in configs:
        replay = scenario
        if config.threads and program.threads and config.threads != program.threads[0]:
            replay = program.with_threads(scenario, config.threads, opts.work / f"{program.name}-threads{config.threads}.toml")
        term.note(f"{program.name}: {config.name} ({config.label()}): simulating {opts.seeds} seeds")
        window_s = None if config.name == "captured" else opts.duration_s
        sims[config.name] = predict(program, replay, config, opts.seeds, window_s)
    return sims


def judged(program: Program, configs: list[Config], runs: dict[str, list[dict]], pooled: dict[str, dict], sims: dict[str, list[dict]], about: dict) -> list[dict]:
    """A program's rows: each configuration's kernel `runs` (their requests
    `pooled`) against the simulator's seeds (`sims`, each seed's requests
    under `latencies_ms`, pooled here), the latency outside the replay added
    to the seeds', and the verdicts; `about` (the capture, the demand) in each."""
    sims_pooled = {name: pooled_percentiles([s.pop("latencies_ms", []) for s in seeds]) for name, seeds in sims.items()}
    outside_ms = latency_outside_ms(runs["captured"][0], sims_pooled["captured"])
    rows = []
    for config in configs:
        sim = [with_latency_outside(s, outside_ms) for s in sims[config.name]]
        sim_pooled = with_latency_outside(sims_pooled[config.name], outside_ms)
        kernel, kernel_pooled = runs[config.name], pooled[config.name]
        rows.append({
            "program": program.name, "config": config.name, "limit": config.label(), "configuration": asdict(config),
            "kernel": kernel, "kernel_pooled": kernel_pooled, "sim": sim, "sim_pooled": sim_pooled,
            "verdict": verdicts(kernel, kernel_pooled, sim, sim_pooled), "latency_outside_ms": outside_ms, **about,
        })
    return rows


def finished_run(path: Path) -> dict:
    """A finished run's acceptance.json, checked for what `rejudge` needs:
    its rows, and each program's capture in `CAPTURES/` beside it; an
    AcceptanceError says in one line what is missing."""
    try:
        doc = json.loads(path.read_text())
        names = list(dict.fromkeys(r["program"] for r in doc["rows"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise AcceptanceError(f"{path}: not a finished run's acceptance.json ({e})") from e
    captures = path.parent / CAPTURES
    missing = [name for name in names if not (captures / f"{name}.toml").is_file()]
    if missing:
        raise AcceptanceError(f"no capture of {missing[0]} in {captures}: --rejudge needs the run's captures beside its JSON")
    return doc


def rejudge(doc: dict, captures: Path, seeds: int, term: Terminal, known: Optional[dict[str, type[Program]]] = None) -> dict:
    """A finished run (`doc`, its acceptance.json) with every prediction made
    again by this simulator from the run's captures (each program's
    `<name>.toml` and side file in `captures`), against the same kernel runs:
    what a change to the simulator does to the published table, without an
    idle host. `known`: the programs by name (default the built-ins)."""
    known = PROGRAMS if known is None else known
    unknown = [r["program"] for r in doc["rows"] if r["program"] not in known]
    if unknown:
        raise AcceptanceError(f"the run has program {unknown[0]!r}, not built in: name its FILE.py too")
    rows = []
    with tempfile.TemporaryDirectory(prefix="throttlelab-rejudge-") as work:
        # Replays made from a capture (another thread count) go to `work`.
        opts = Options(doc["runs"], seeds, doc["duration_s"], doc["capture_s"], 0, 0, captures, Path(work))
        for name in dict.fromkeys(r["program"] for r in doc["rows"]):
            program = known[name]()
            mine = [r for r in doc["rows"] if r["program"] == name]
            configs = [Config(**r["configuration"]) for r in mine]
            sims = predictions(program, captures / f"{name}.toml", configs, opts, term)
            about = {"capture": mine[0]["capture"], "demand": mine[0]["demand"]}
            rows += judged(program, configs, {r["config"]: r["kernel"] for r in mine}, {r["config"]: r["kernel_pooled"] for r in mine}, sims, about)
    return {**doc, "seeds": seeds, "rows": rows, "rejudged": time.strftime("%Y-%m-%d")}


def pooled_percentiles(runs: list[list[float]]) -> dict[str, float]:
    """p50 and p99 of every request of `runs` (each run's latencies, ms)
    together, where each run's own p99 rests on its few slowest (a 10 s window
    of 400 requests: its 4th slowest): a row's kernel runs, or the
    simulator's seeds, alike. Nothing without latencies."""
    latencies = sorted(x for run in runs for x in run)
    return {f"p{q}_ms": percentile(latencies, q) for q in (50, 99)} if latencies else {}


def latency_outside_ms(captured: dict[str, float], replay: dict[str, float]) -> Optional[float]:
    """The part of the program's latency that its replay does not hold: the
    capture run's median less the replay's (its seeds pooled), at the
    capture's own limit. A request's latency as the program measures it adds
    what happens outside the captured cgroup (pgbench's own CPU, the socket's
    round trip) to the server's part the replay predicts; throttling does not
    touch that part, so it carries to every other limit. None where the
    program reports no latency."""
    if "p50_ms" not in captured or "p50_ms" not in replay:
        return None
    return captured["p50_ms"] - replay["p50_ms"]


def with_latency_outside(sim: dict, outside_ms: Optional[float]) -> dict:
    """A replay's figures with `outside_ms` added to each latency percentile."""
    if outside_ms is None:
        return sim
    return {k: v + outside_ms if re.fullmatch(r"p\d+_ms", k) else v for k, v in sim.items()}


def retried(run: Callable[[], Measured], term: Terminal) -> Measured:
    """`run()`, once more if it fails (a program that did not start, a busy
    moment): one bad run should not cost the others."""
    try:
        return run()
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        term.note(f"run failed ({e}); once more")
        return run()


def capture_cost(program: Program, opts: Options, term: Terminal) -> Optional[dict]:
    """The program's throughput (`Program.throughput`, unlimited) over the
    window without and with a capture running, `cost_runs` runs each,
    alternating so that drift in the host's load falls on both."""
    if opts.cost_runs == 0 or not program.throughput_unit:
        return None
    free = UNLIMITED
    load = lambda cgroup, run_s: {"throughput": program.throughput(cgroup, run_s)}  # noqa: E731
    without, with_ = [], []
    for i in range(opts.cost_runs):
        term.note(f"{program.name}: capture cost, run {i + 1}/{opts.cost_runs}")
        without.append(retried(lambda: measure(load, free, opts.duration_s, "cost"), term).figures["throughput"])
        with_.append(retried(lambda: capture(load, free, opts.duration_s, opts.work / "cost.toml"), term).figures["throughput"])
    return {"program": program.name, "figure": program.throughput_unit, "without": without, "with": with_}


def run_programs(names: list[str], opts: Options, note: str, term: Terminal) -> int:
    """Accept every program `names` asks for (see `resolve_programs`) and write the
    report to `opts.out`; the exit status (1 if a program failed). Holds the
    real backend's lock throughout; SIGTERM ends it as Ctrl-C does, through
    the cleanups (a running capture removes its tracefs instance, the
    programs' cgroups go)."""
    chosen = resolve_programs(names)
    if opts.runs < 1:
        raise AcceptanceError("--runs: at least 1 (the capture is taken among the kernel runs)")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    opts.work.mkdir(parents=True, exist_ok=True)
    with run_lock():
        started = time.monotonic()
        rows, costs, failed = [], [], {}
        for name, cls in chosen.items():
            program = cls()
            try:
                program.setup()
                r, c = accept(program, opts, term)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                # One program's failure leaves the others' results standing.
                term.note(f"{name}: failed: {e}")
                failed[name] = str(e)
                continue
            finally:
                program.teardown()
            rows += r
            costs += [c] if c else []
            keep_capture(opts.work, name, opts.out / CAPTURES)
        doc = {
            "note": note, "release": os.uname().release, "runs": opts.runs, "seeds": opts.seeds, "duration_s": opts.duration_s,
            "capture_s": opts.capture_s, "wall_s": round(time.monotonic() - started), "rows": rows, "capture_cost": costs, "failed": failed,
        }
    return report(opts.out, doc, term)


def rejudge_file(path: Path, seeds: int, out: Path, names: list[str], term: Terminal) -> int:
    """`rejudge` of the finished run at `path` (its acceptance.json, the
    captures beside it), the report written to `out`; `names` add programs
    of the user's own (FILE.py) to the built-ins."""
    known = {**PROGRAMS, **resolve_programs([n for n in names if n.endswith(".py")])} if names else PROGRAMS
    doc = finished_run(path)
    return report(out, rejudge(doc, path.parent / CAPTURES, seeds, term, known), term)


def keep_capture(work: Path, name: str, captures: Path) -> None:
    """Program `name`'s capture (scenario and side file) copied from `work`
    into `captures`."""
    captures.mkdir(parents=True, exist_ok=True)
    for path in (work / f"{name}.toml", work / f"{name}.phases.gz"):
        shutil.copy(path, captures / path.name)


def report(out: Path, doc: dict, term: Terminal) -> int:
    """`doc` written to `out` as acceptance.json and the table in
    acceptance.md; the exit status: 1 if a program failed."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "acceptance.json").write_text(json.dumps(doc, indent=1) + "\n")
    table = markdown(doc)
    write_report(out / "acceptance.md", table, doc)
    term.print(table)
    return 1 if doc["failed"] else 0


def write_report(path: Path, table: str, doc: dict) -> None:
    """Replace the generated part of docs/acceptance.md (between its markers),
    keeping the prose around it."""
    begin, end = "<!-- acceptance.py: begin -->", "<!-- acceptance.py: end -->"
    again = f"; predictions made again on {doc['rejudged']} by `--rejudge`" if "rejudged" in doc else ""
    header = (
        f"Generated by `scripts/acceptance.py` on {doc['release']}: {doc['runs']} kernel runs per configuration, "
        f"{doc['seeds']} simulator seeds, {doc['duration_s']:g} s windows, a {doc.get('capture_s', doc['duration_s']):g} s capture, {doc['wall_s']} s wall. {doc['note']}{again}\n\n"
    )
    failures = "".join(f"\n**{name} failed**: {why}\n" for name, why in doc.get("failed", {}).items())
    generated = f"{begin}\n{header}{table}{failures}{end}"
    text = path.read_text() if path.exists() else f"# Acceptance (issue #16)\n\n{begin}\n{end}\n"
    path.write_text(re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: generated, text, flags=re.S))

