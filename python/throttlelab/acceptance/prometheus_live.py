"""Issue #35's live acceptance: `advise --prometheus` against KRR's rule, on the kernel
(scripts/prometheus_acceptance.py; docs/prometheus.md, "Live acceptance").

Five programs nobody here wrote (Debian's nginx under h2load, PostgreSQL under
`pgbench --rate`, stress-ng, sysbench, rt-app) run at once, each in a v1 cgroup of
its own (cpu, cpuacct and pids, as the kubelet makes them) under a CPU limit,
while the lab's Prometheus scrapes the lab's cAdvisor (scripts/prometheus_lab.sh).
Four steps, each its own command; scrape and apply are each one `tl-measure` hold:

- `scrape`: the programs under their first limits for `--minutes`, then KRR's
  rule on that range on the same Prometheus (`krr_query`, `krr_limits`) and the
  raw samples advise reads; the lab is stopped after. Writes plan.json and
  samples.json.
- `advise`: `throttlelab advise --prometheus` on those samples (served by
  throttlelab.prometheus_fixture), over the scrape's range: re-run as the model
  changes, on the same data. Adds its rows to plan.json.
- `apply --round K [--only NAMES]`: the programs again, all at once, under advise's limits, then
  under KRR's limits, `--run-s` each; each cgroup's cpu.stat (nr_throttled over
  nr_periods) over the run. Writes round-K.json.
- `table`: acceptance.md and acceptance.json from the plan and the rounds: the
  mean throttled ratio of each side over the rounds, and whether advise's is at
  most the target + `THROTTLED_POINTS`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from throttlelab.acceptance import nginx, pgbench
from throttlelab.acceptance.cgroup import Cgroup, run_lock, spawn, stop
from throttlelab.acceptance.programs import Program, StressNg, Sysbench

#: advise's target is met when the kernel's mean throttled ratio is at most
#: the target plus this many points (issue #35, "Done when").
THROTTLED_POINTS = 3.0
#: Our cgroups: /sys/fs/cgroup/{cpu,cpuacct,pids}/PREFIX-NAME; the selector matches them.
PREFIX = "tl-accept35-"
SELECTOR = f'id=~"/{PREFIX}.*"'
PERIOD_US = 100_000
#: The lab's scrape interval: 15 s, as a cluster's Prometheus scrapes the
#: kubelet's cAdvisor (kube-prometheus' ServiceMonitor and many others do).
SCRAPE = "15s"
#: advise's window: one per step, 20 over 10 minutes.
STEP = "30s"
#: KRR (robusta-dev/krr): the simple strategy's request and simple_limit's limit
#: percentiles of usage as the issue names them (`krr simple_limit --cpu_request 95
#: --cpu_limit 99`), its smallest CPU value (config.py's cpu_min_value, 10m), and
#: its step (`--timeframe_duration`, minutes) set to one scrape here, since its
#: default (1.25 min) would give 8 points in 10 minutes.
KRR_REQUEST_PERCENTILE = 95.0
KRR_LIMIT_PERCENTILE = 99.0
KRR_MIN_M = 10
KRR_STEP_S = 15
#: The programs start this long before a window's first cpu.stat reading, and the
#: window ends this long before they stop (their clients start and end).
LEAD_S = 10.0
TAIL_S = 5.0


class LiveError(RuntimeError):
    """A step that cannot go on (no lab, no plan, a program missing), in one line."""


class RtApp(Program):
    """rt-app (Debian's rt-app) with `instances` threads that each run
    `runtime_us` of CPU on a timer of `timer_us` for `loop` times, then sleep
    `rest_us`: bursts of all the threads together, then nothing."""

    name = "rt-app"
    binaries = ("rt-app",)
    package = "rt-app"
    instances = 3
    runtime_us = 10_000
    timer_us = 40_000
    loop = 20
    rest_us = 800_000

    def config(self, duration_s: float, logdir: Path) -> dict[str, Any]:
        """rt-app's JSON (only `runtime` events, so no calibration is needed)."""
        return {
            "global": {"duration": max(1, round(duration_s)), "calibration": 100, "default_policy": "SCHED_OTHER",
                       "logdir": str(logdir), "log_basename": "rt-app"},
            "tasks": {"burst": {"instance": self.instances, "loop": -1, "phases": {
                "busy": {"loop": self.loop, "runtime": self.runtime_us, "timer": {"ref": "unique", "period": self.timer_us}},
                "rest": {"sleep": self.rest_us},
            }}},
        }  # fmt: skip

    def run(self, cgroup: Path, threads: int, duration_s: float) -> dict[str, float]:
        logdir = Path(tempfile.mkdtemp(prefix="throttlelab-rt-app-"))
        try:
            (logdir / "rt-app.json").write_text(json.dumps(self.config(duration_s, logdir)))
            proc = spawn(cgroup, ["rt-app", str(logdir / "rt-app.json")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                proc.wait(timeout=duration_s + 30)
            finally:
                stop(proc)
            if proc.returncode != 0:
                raise RuntimeError(f"rt-app exited {proc.returncode}")
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
        return {}


@dataclass(frozen=True)
class Workload:
    """One program of the five: how to make it, with how many threads (or
    clients), and its first limit in millicores."""

    name: str
    make: Callable[[], Program]
    threads: int
    limit_m: int


def _nginx() -> Program:
    p = nginx.Program()
    p.rate_per_s = 25.0
    return p


def _sysbench() -> Program:
    p = Sysbench()
    p.rate_per_s = 20
    return p


def _stress_ng() -> Program:
    p = StressNg()
    p.load_pct = 15
    return p


#: The five, with demand (on this host) of about 0.18, 0.27, 0.30, 0.25 and 0.38
#: CPUs: some 1.4 of the 2 CPUs. The first limits throttle each: nginx and pgbench
#: near their demand, stress-ng under it, sysbench and rt-app in their bursts.
WORKLOADS = (
    Workload("nginx", _nginx, 0, 250),
    Workload("pgbench", lambda: pgbench.Program(rate_per_s=30), 4, 300),
    Workload("stress-ng", _stress_ng, 2, 200),
    Workload("sysbench", _sysbench, 4, 300),
    Workload("rt-app", RtApp, 0, 500),
)


def install(programs: list[Program]) -> None:
    """apt-get install the Debian packages of the programs whose executables are missing."""
    packages = sorted({pkg for p in programs if any(shutil.which(b) is None for b in p.binaries) for pkg in p.package.split()})
    if not packages:
        return
    subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", *packages], check=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, stdout=subprocess.DEVNULL)


def throttled_window(before: dict[str, int], after: dict[str, int], seconds: float) -> dict[str, float]:
    """cpu.stat between two readings: periods, throttled periods, their ratio,
    throttled seconds (what the fit's throttled share is made of), CPUs used."""
    periods = after["nr_periods"] - before["nr_periods"]
    throttled = after["nr_throttled"] - before["nr_throttled"]
    return {
        "nr_periods": periods, "nr_throttled": throttled, "throttled_ratio": throttled / periods if periods else 0.0,
        "throttled_s": (after["throttled_usec"] - before["throttled_usec"]) / 1e6,
        "usage_cpus": (after["usage_usec"] - before["usage_usec"]) / 1e6 / seconds, "window_s": seconds,
    }  # fmt: skip


def run_all(limits_m: dict[str, int], duration_s: float, programs: dict[str, Program]) -> dict[str, dict[str, Any]]:
    """Every workload at once for `duration_s`, each in its own cgroup under its
    limit (`limits_m`, at `PERIOD_US`); each cgroup's cpu.stat from `LEAD_S` in to
    `TAIL_S` before the end, with its start and end (unix seconds). The
    workloads are those `limits_m` names."""
    workloads = [w for w in WORKLOADS if w.name in limits_m]
    cgroups = {w.name: Cgroup(PREFIX + w.name, PERIOD_US, limits_m[w.name] * PERIOD_US // 1000, 0, pids=True) for w in workloads}
    errors: dict[str, str] = {}

    def one(w: Workload) -> None:
        try:
            programs[w.name].run(cgroups[w.name].path, w.threads, duration_s)
        except Exception as e:  # noqa: BLE001 - said in the row, the others go on
            errors[w.name] = f"{type(e).__name__}: {e}"

    for cg in cgroups.values():
        cg.__enter__()
    try:
        threads = [threading.Thread(target=one, args=(w,), daemon=True) for w in workloads]
        t0 = time.time()
        for t in threads:
            t.start()
        time.sleep(max(0.0, t0 + LEAD_S - time.time()))
        start_s, before = time.time(), {n: cg.stats() for n, cg in cgroups.items()}
        time.sleep(max(0.0, t0 + duration_s - TAIL_S - time.time()))
        end_s, after = time.time(), {n: cg.stats() for n, cg in cgroups.items()}
        for t in threads:
            t.join()
    finally:
        for cg in cgroups.values():
            cg.__exit__(None, None, None)
    out = {}
    for n in cgroups:
        out[n] = {"limit_m": limits_m[n], "start_s": start_s, "end_s": end_s, **throttled_window(before[n], after[n], end_s - start_s)}
        if n in errors:
            out[n]["error"] = errors[n]
    return out


def with_programs(body: Callable[[dict[str, Program]], Any], do_install: bool, names: Optional[list[str]] = None) -> Any:
    """`body` with every workload's program (or those `names` names) set up (and
    torn down after), under the real backend's lock."""
    programs = {w.name: w.make() for w in WORKLOADS if names is None or w.name in names}
    if do_install:
        install(list(programs.values()))
    with run_lock():
        done: list[Program] = []
        try:
            for p in programs.values():
                p.setup()
                done.append(p)
            return body(programs)
        finally:
            for p in done:
                p.teardown()


# -- KRR's rule ---------------------------------------------------------------


def krr_query(container_id: str) -> str:
    """KRR's CPU series (robusta_krr/core/integrations/prometheus/metrics/cpu.py,
    `CPULoader`: ``sum(irate(container_cpu_usage_seconds_total{namespace, pod,
    container}[5m])) by (container, pod, job)``) for a raw cgroup, which has
    only `id` for namespace/pod/container."""
    return f'sum(irate(container_cpu_usage_seconds_total{{id="{container_id}"}}[5m])) by (id, job)'


def linear_percentile(values: list[float], q: float) -> float:
    """numpy.percentile's default ('linear') `q`-th percentile, as KRR takes it."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    at = (len(ordered) - 1) * q / 100
    lo = math.floor(at)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (at - lo)


def krr_limits(values: list[float]) -> dict[str, Any]:
    """KRR simple_limit's CPU recommendation (strategies/simple_limit.py:
    request and limit are `np.percentile` of every point of the CPU series) from
    those points (CPUs), in whole millicores (rounded up, at least `KRR_MIN_M`)."""
    def m(cpus: float) -> int:
        return max(KRR_MIN_M, math.ceil(round(cpus * 1000, 6)))

    return {
        "points": len(values), "request_m": m(linear_percentile(values, KRR_REQUEST_PERCENTILE)),
        "limit_m": m(linear_percentile(values, KRR_LIMIT_PERCENTILE)),
    }


def krr(url: str, ids: list[str], start_s: float, end_s: float) -> dict[str, dict[str, Any]]:
    """KRR's rule for each cgroup id, from its CPU series on the server at `url`."""
    from throttlelab.prometheus import connect

    query = connect(url, start_s, end_s, KRR_STEP_S)
    out = {}
    for cid in ids:
        series = query(krr_query(cid))
        values = [float(v) for s in series for _, v in s["values"] if not math.isnan(float(v))]
        out[cid] = {**krr_limits(values), "query": krr_query(cid)} if values else {"points": 0, "query": krr_query(cid)}
    return out


# -- the steps ----------------------------------------------------------------


def _lab(script: Path, action: str) -> str:
    """scripts/prometheus_lab.sh ACTION at our scrape interval; its output (the URL)."""
    proc = subprocess.run(["bash", str(script), action], capture_output=True, text=True, env={**os.environ, "SCRAPE": SCRAPE})
    if proc.returncode != 0:
        raise LiveError(f"scripts/prometheus_lab.sh {action}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
    return proc.stdout.strip()


def samples(url: str, end_s: float, range_s: float, selector: str = SELECTOR) -> dict[str, Any]:
    """Every raw sample of the counters and gauges advise reads, for our cgroups,
    over the `range_s` before `end_s` and a minute either side, as a fixture
    (throttlelab.prometheus_fixture): advise can be run again on exactly these
    samples after the lab is gone (the `advise` step)."""
    from prometheus_api_client import PrometheusConnect

    from throttlelab.prometheus import COUNTERS, GAUGES, MACHINE_CPUS, USAGE

    prom = PrometheusConnect(url=url, disable_ssl=True)
    series = []
    # machine_cpu_cores has no container labels: every node's, unselected; the
    # root container's usage is the node's (its other load).
    for metric, match in [*((m, selector) for m in (*COUNTERS, *GAUGES)), (MACHINE_CPUS, ""), (USAGE, 'id="/"')]:
        for s in prom.custom_query(f"{metric}{{{match}}}[{round(range_s) + 120}s]", params={"time": end_s + 60}):
            series.append({"metric": s["metric"], "samples": [[float(t), float(v)] for t, v in s["values"]]})
    return {"series": series}


def scrape(out: Path, minutes: float, do_install: bool, lab: Path, only: Optional[list[str]] = None) -> dict[str, Any]:
    """The five (or those `only` names) under their first limits for `minutes`
    while Prometheus scrapes (the lab started by `lab`, scripts/prometheus_lab.sh);
    then KRR's rule on that range and the raw samples advise reads
    (samples.json); the lab is stopped after. Writes plan.json (advise's rows
    come from the `advise` step)."""
    range_s = round(minutes * 60)
    url = _lab(lab, "start")
    try:
        first = {w.name: w.limit_m for w in WORKLOADS if only is None or w.name in only}
        # Two scrapes before the window and two after it, so that its ends have samples.
        measured = with_programs(lambda programs: run_all(first, range_s + LEAD_S + TAIL_S + 2 * 15, programs), do_install, only)
        end_s = int(max(m["end_s"] for m in measured.values()))
        time.sleep(20)  # the last samples of the window are scraped
        ids = ["/" + PREFIX + name for name in first]
        krr_rows = krr(url, ids, end_s - range_s, end_s)
        raw = samples(url, end_s, range_s)
    finally:
        _lab(lab, "stop")
    plan = {"minutes": minutes, "scrape": SCRAPE, "step": STEP, "end_s": end_s, "scraped": measured, "krr": krr_rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / "samples.json").write_text(json.dumps(raw) + "\n")
    (out / "plan.json").write_text(json.dumps(plan, indent=1) + "\n")
    return plan


def advise(out: Path, max_throttled: float) -> dict[str, Any]:
    """`throttlelab advise --prometheus` on the scrape's samples (samples.json,
    served as Prometheus answers them by throttlelab.prometheus_fixture), over
    the scrape's range. Adds its rows and command to plan.json."""
    from throttlelab.prometheus_fixture import Fixture, serve

    plan_path, samples_path = out / "plan.json", out / "samples.json"
    if not plan_path.is_file() or not samples_path.is_file():
        raise LiveError(f"{out}: no plan.json and samples.json (run the scrape step first)")
    plan = json.loads(plan_path.read_text())
    server, url = serve(Fixture(json.loads(samples_path.read_text())))
    try:
        argv = [
            "throttlelab", "advise", "--prometheus", url, "--selector", SELECTOR, "--range", f"{round(plan['minutes'] * 60)}s",
            "--step", plan["step"], "--end", str(plan["end_s"]), "--max-throttled", f"{max_throttled:g}", "--json",
        ]  # fmt: skip
        proc = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True)
    finally:
        server.shutdown()
    if proc.returncode != 0:
        raise LiveError(f"advise --prometheus exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    argv[3] = "URL"  # the fixture's port is not the command's
    plan.update(max_throttled=max_throttled, advise_command=" ".join(a if " " not in a and '"' not in a else f"'{a}'" for a in argv), advise=json.loads(proc.stdout))
    plan_path.write_text(json.dumps(plan, indent=1) + "\n")
    return plan


#: The limit a "remove limit" row runs at: the node's 2 CPUs.
NO_LIMIT_M = 2000


def limits(plan: dict[str, Any]) -> dict[str, dict[str, Optional[int]]]:
    """Each side's limit per workload: advise's recommendation (None when it
    refused or said to remove the limit) and KRR's p99."""
    rows = {r["id"]: r for r in plan["advise"]["containers"]}
    out: dict[str, dict[str, Optional[int]]] = {"throttlelab": {}, "krr": {}}
    for w in WORKLOADS:
        cid = "/" + PREFIX + w.name
        out["throttlelab"][w.name] = rows[cid]["recommended_m"] if cid in rows else None
        out["krr"][w.name] = plan["krr"].get(cid, {}).get("limit_m")
    return out


def applied(plan: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The limits each side runs at: its own, or where it gave none, what a user
    does then: a refused row keeps its first limit, "remove limit" runs at
    `NO_LIMIT_M`."""
    status = {r["id"]: r["status"] for r in plan["advise"]["containers"]}
    first = {w.name: w.limit_m for w in WORKLOADS}
    return {
        side: {n: m if m is not None else NO_LIMIT_M if status.get("/" + PREFIX + n) == "remove limit" else first[n] for n, m in lim.items()}
        for side, lim in limits(plan).items()
    }


def apply(out: Path, round_: int, run_s: float, do_install: bool, only: Optional[list[str]] = None) -> dict[str, Any]:
    """One round: the five (or those `only` names) under advise's limits, then
    under KRR's. Writes round-K.json."""
    plan_path = out / "plan.json"
    if not plan_path.is_file():
        raise LiveError(f"{plan_path}: no plan (run the scrape step first)")
    plan = json.loads(plan_path.read_text())
    if "advise" not in plan:
        raise LiveError(f"{plan_path}: no advise rows (run the advise step first)")
    sides = {side: {n: m for n, m in lim.items() if only is None or n in only} for side, lim in applied(plan).items()}

    def body(programs: dict[str, Program]) -> dict[str, Any]:
        return {side: run_all(lim, run_s, programs) for side, lim in sides.items()}

    result = {"round": round_, "run_s": run_s, "sides": with_programs(body, do_install, only)}
    (out / f"round-{round_}.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def table(plan: dict[str, Any], rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The acceptance table: per workload the rounds ran, what was scraped, each
    side's limit and its mean throttled ratio over the rounds, and whether advise
    met the target."""
    sides = limits(plan)
    advised = {r["id"]: r for r in plan["advise"]["containers"]}
    target = plan["max_throttled"]
    rows = []
    for w in WORKLOADS:
        if any(w.name not in r["sides"]["throttlelab"] for r in rounds):
            continue
        cid = "/" + PREFIX + w.name
        a = advised.get(cid, {})
        row: dict[str, Any] = {
            "workload": w.name, "first_limit_m": w.limit_m, "scraped": plan["scraped"][w.name],
            "usage_p50_m": a.get("usage_p50_m"), "usage_p95_m": a.get("usage_p95_m"), "usage_max_m": a.get("usage_max_m"),
            "advise_status": a.get("status"), "advise_reason": a.get("reason"),
            "predicted": [a.get("predicted_low"), a.get("predicted_throttled"), a.get("predicted_high")],
            "krr_request_m": plan["krr"].get(cid, {}).get("request_m"), "krr_points": plan["krr"].get(cid, {}).get("points"),
        }  # fmt: skip
        for side in ("throttlelab", "krr"):
            runs = [r["sides"][side][w.name] for r in rounds]
            ratios = [x["throttled_ratio"] for x in runs]
            row[side] = {
                "limit_m": sides[side][w.name], "applied_m": runs[0]["limit_m"] if runs else None, "runs": ratios, "mean": statistics.fmean(ratios) if ratios else None,
                "usage_cpus": statistics.fmean(x["usage_cpus"] for x in runs) if runs else None,
                "errors": [x["error"] for x in runs if "error" in x],
            }
        mean = row["throttlelab"]["mean"]
        row["meets_target"] = None if mean is None or sides["throttlelab"][w.name] is None else mean <= target + THROTTLED_POINTS / 100
        rows.append(row)
    return {"max_throttled": target, "points": THROTTLED_POINTS, "advise_command": plan["advise_command"], "rounds": len(rounds), "rows": rows}


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def markdown(doc: dict[str, Any]) -> str:
    """The table as docs/prometheus.md shows it."""
    lines = [
        f"Target: at most {_pct(doc['max_throttled'])} of periods throttled (advise's `--max-throttled`), met when the mean over "
        f"{doc['rounds']} round(s) is at most the target + {doc['points']:g} points.",
        "",
        "| workload | first limit | usage p50 / p95 / max | throttled at first limit | advise: limit | predicted | measured, mean [runs] | meets | KRR: request (p95) | KRR: limit (p99) | measured, mean [runs] |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        ours, theirs = r["throttlelab"], r["krr"]

        def runs(side: dict[str, Any]) -> str:
            return f"{_pct(side['mean'])} [{', '.join(f'{100 * x:.1f}' for x in side['runs'])}]" + (" (error)" if side["errors"] else "")

        limit = f"{ours['limit_m']}m" if ours["limit_m"] is not None else f"{r['advise_status']} (run at {ours['applied_m']}m)"
        low, mid, high = r["predicted"]
        predicted = "-" if mid is None else f"{_pct(mid)} ({_pct(low)}-{_pct(high)})"
        meets = {True: "yes", False: "**no**", None: "-"}[r["meets_target"]]
        lines.append(
            f"| {r['workload']} | {r['first_limit_m']}m | {r['usage_p50_m']}m / {r['usage_p95_m']}m / {r['usage_max_m']}m "
            f"| {_pct(r['scraped']['throttled_ratio'])} | {limit} | {predicted} | {runs(ours)} | {meets} "
            f"| {r['krr_request_m']}m | {theirs['limit_m']}m | {runs(theirs)} |"
        )
    return "\n".join(lines) + "\n"


def write_table(out: Path) -> dict[str, Any]:
    plan_path = out / "plan.json"
    if not plan_path.is_file():
        raise LiveError(f"{plan_path}: no plan (run the scrape step first)")
    rounds = [json.loads(p.read_text()) for p in sorted(out.glob("round-*.json"))]
    if not rounds:
        raise LiveError(f"{out}: no round-K.json (run the apply step first)")
    doc = table(json.loads(plan_path.read_text()), rounds)
    (out / "acceptance.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "acceptance.md").write_text(markdown(doc))
    return doc


def main(argv: list[str], lab: Path) -> int:
    """scripts/prometheus_acceptance.py's command line; `lab`: scripts/prometheus_lab.sh."""
    parser = argparse.ArgumentParser(prog="prometheus_acceptance.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("scrape", "advise", "apply", "table"))
    parser.add_argument("-o", "--out", type=Path, required=True, help="the run's directory (plan.json, round-K.json, acceptance.md/.json)")
    parser.add_argument("--minutes", type=float, default=10.0, help="scrape: how long the five run under their first limits")
    parser.add_argument("--max-throttled", type=float, default=0.05, help="advise: its target (a ratio)")
    parser.add_argument("--round", default="1", help="apply: which round (1, 2, 3), or several one after the other (1,2)")
    parser.add_argument("--run-s", type=float, default=180.0, help="apply: seconds each side runs")
    parser.add_argument("--only", help="scrape, apply: these workloads only (comma-separated names, e.g. rt-app,stress-ng)")
    parser.add_argument("--install", action="store_true", help="apt-get install the programs' Debian packages that are missing")
    args = parser.parse_args(argv)
    # SIGTERM (tl-measure passes it on) ends the step through its cleanups: the
    # programs, their cgroups and the lab stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        only = None if args.only is None else args.only.split(",")
        unknown = sorted(set(only or ()) - {w.name for w in WORKLOADS})
        if unknown:
            raise LiveError(f"--only {unknown[0]!r}: not one of {', '.join(w.name for w in WORKLOADS)}")
        if args.step == "scrape":
            if args.minutes * 60 < 3 * 30:
                raise LiveError("--minutes: at least 1.5 (three 30 s windows for advise)")
            scrape(args.out, args.minutes, args.install, lab, only)
        elif args.step == "advise":
            advise(args.out, args.max_throttled)
        elif args.step == "apply":
            try:
                rounds = [int(k) for k in args.round.split(",")]
            except ValueError:
                raise LiveError(f"--round {args.round!r}: expected round numbers such as 1 or 1,2") from None
            for k in rounds:
                apply(args.out, k, args.run_s, args.install, only)
        else:
            print(write_table(args.out) and (args.out / "acceptance.md").read_text(), end="")
    except (LiveError, OSError, RuntimeError, subprocess.CalledProcessError) as e:
        print(f"prometheus_acceptance: error: {e}", file=sys.stderr)
        return 2
    return 0
