"""``throttlelab advise --prometheus URL``: a limit for every container a
selector matches, from its cAdvisor counters (throttlelab.prometheus), by
demand models fitted to them (throttlelab.prometheus_model) and advise's
search, every simulation through the one runner (local pool or Ray).

One row per container, grouped by workload: its limit in millicores, usage
p50/p95/max over its windows, the throttled ratio observed, and the
recommended limit with the throttled ratio the worst consistent model
predicts there and the range of all of them; or "no limit", or a refusal in
words where the data cannot decide; and the ``throttlelab capture`` command
that captures it on its node, from cAdvisor's ``id`` (its cgroup path).
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from throttlelab.kubelet_cgroups import capture_command
from throttlelab.metrics import millicores, percentile
from throttlelab.platforms import PLATFORMS
from throttlelab.prometheus import Container, PrometheusError, Query, containers, workload
from throttlelab.prometheus_latency import Observed, observed
from throttlelab.prometheus_model import MIN_WINDOWS, NEAR_LIMIT, Fit, Plan, recommended
from throttlelab.runner import Run, Runner, document, simulate
from throttlelab.terminal import table

if TYPE_CHECKING:
    from rich.console import RenderableType

COLUMNS = (
    "workload", "namespace", "pod", "container", "id", "limit_m", "period_us", "usage_p50_m", "usage_p95_m", "usage_max_m",
    "throttled_now", "windows", "recommended_m", "predicted_throttled", "predicted_low", "predicted_high",
    "models", "status", "reason", "capture", "observed_p99_ms", "predicted_p99_ms",
)


def _row(c: Container) -> dict[str, Any]:
    kind, name = workload(c.labels)
    usage = [w.usage_cpus for w in c.windows] or [0.0]
    periods = sum(w.periods for w in c.windows)
    last = c.windows[-1] if c.windows else None
    row = {
        "workload": f"cgroup {name}" if kind == "cgroup" else f"{kind}/{name}", "namespace": c.labels.get("namespace", ""), "pod": c.labels.get("pod", ""),
        "container": c.labels.get("container", ""), "id": c.labels.get("id", ""),
        "limit_m": millicores(last.quota_us, last.period_us) if last and last.quota_us else None,
        "period_us": last.period_us if last else None,
        "usage_p50_m": round(1000 * percentile(sorted(usage), 50)), "usage_p95_m": round(1000 * percentile(sorted(usage), 95)),
        "usage_max_m": round(1000 * max(usage)),
        "throttled_now": sum(w.throttled_periods for w in c.windows) / periods if periods else 0.0,
        "windows": len(c.windows), "recommended_m": None, "predicted_throttled": None, "predicted_low": None,
        "predicted_high": None, "models": None, "status": "advice", "reason": "",
        "capture": capture_command(c.labels.get("id", "")),  # on the container's node
        "observed_p99_ms": None, "predicted_p99_ms": None,  # with --latency-metric
    }
    if c.resets or c.gaps:
        row["reason"] = f"{c.resets} counter reset(s), {c.gaps} missing step(s) skipped; "
    return row


def simulate_chunk(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Several simulations in one task (a pool's or Ray's)."""
    return [simulate(*run) for run in runs]


class Batched:
    """The runner's ``run_many``, a chunk of runs per task: one window's
    simulation takes milliseconds, less than a Ray task costs to schedule.
    Each run is validated here first, as run_many does; the results come back
    in the order of the runs, whatever the chunks."""

    def __init__(self, runner: Runner):
        self.runner = runner

    def run_many(self, runs: Sequence[Run]) -> list[dict[str, Any]]:
        runs = [Run(*run) for run in runs]
        for run in runs:
            document(run.text).validate(list(run.overrides))
        size = max(1, min(64, -(-len(runs) // (4 * self.runner.workers))))
        chunks = [(runs[i : i + size],) for i in range(0, len(runs), size)]
        return [doc for part in self.runner.map(simulate_chunk, chunks) for doc in part]


def _refusal(c: Container) -> Optional[str]:
    """Why the data cannot decide this container's limit, or None."""
    if len(c.windows) < MIN_WINDOWS:
        return f"too few windows ({len(c.windows)}, needs {MIN_WINDOWS}): a longer --range or a shorter --step"
    quota_cpus = c.windows[-1].quota_us / c.windows[-1].period_us  # type: ignore[operator]
    busiest = max(w.usage_cpus for w in c.windows)
    if not any(w.throttled_periods for w in c.windows) and busiest < NEAR_LIMIT * quota_cpus:
        return (
            f"never throttled and never near its limit (busiest window {1000 * busiest:.0f}m of {1000 * quota_cpus:.0f}m):"
            " nothing says how it would fare under a lower one"
        )
    return None


def advise_prometheus(
    query: Query, selector: str, steps: list[float], max_throttled: float, runner: Runner,
    captures: Optional[dict[str, Callable[[], dict[str, Any]]]] = None, timings: Optional[dict[str, float]] = None,
    keep: Optional[dict[str, Container]] = None, latency_metric: Optional[str] = None, max_p99_ms: Optional[float] = None,
) -> list[dict[str, Any]]:
    """The rows for every container ``selector`` matches (see the module's doc).
    ``captures`` maps a container's name or id to its capture-based advice
    (advise on the capture), which replaces the model for that row;
    ``timings`` gets the fit's and the search's wall seconds; ``keep`` each
    row's container (its windows), by the row's pod/container or id.
    ``latency_metric`` names a request-latency histogram: each row gets its
    observed p99 and the p99 predicted at the recommendation, which
    ``max_p99_ms`` bounds (prometheus_latency, docs/prometheus.md "Latency")."""
    found = containers(query, selector, steps)
    if not found:
        raise PrometheusError(f"--selector {selector!r} matches no container (no {'container_cpu_usage_seconds_total'} series)")
    latencies = observed(query, latency_metric, selector, steps) if latency_metric else {}
    captures = dict(captures or {})
    rows, fits = [], []
    seen: dict[int, Optional[Observed]] = {}  # by id(fit): its histogram's p99, where the model may move it
    for c in found:
        row = _row(c)
        rows.append(row)
        if keep is not None:
            keep[_name(row)] = c
        capture = captures.pop(c.name, None) or captures.pop(c.labels.get("id", ""), None)
        if not c.windows:
            row["status"], row["reason"] = "refused", row["reason"] + f"too few windows (0, needs {MIN_WINDOWS}): a longer --range or a shorter --step"
        elif row["limit_m"] is None:
            row["status"], row["reason"] = "no limit", row["reason"] + "no CPU limit"
        elif capture is not None:
            _from_capture(row, capture())
        elif reason := _refusal(c):
            row["status"], row["reason"] = "refused", row["reason"] + reason
        else:
            fit = Fit(c)
            fits.append((row, fit))
            if latency_metric:
                seen[id(fit)] = _observed_p99(row, latencies.get((row["namespace"], row["pod"], row["container"])), latency_metric)
            if not fit.fits_seconds:
                row["reason"] += f"no machine_cpu_cores for its node: simulated on {fit.cpus} CPUs, throttled seconds not fitted; "
    if captures:
        raise PrometheusError(f"--capture {next(iter(captures))}: no container of that name or id matches --selector")
    runner = Batched(runner)  # type: ignore[assignment]
    clock, cpu = time.monotonic(), time.process_time()
    _fit(runner, [f for _, f in fits])
    # Where no independent model reproduces the counters, the closed loop and
    # the aligned family; where none of those does, the aligned family's timed kind.
    while widened := [f for _, f in fits if f.widen()]:
        _fit(runner, widened)
    fitted, fitted_cpu = time.monotonic(), time.process_time()
    searched = [(row, fit) for row, fit in fits if _consistent(row, fit)]
    for row, fit in searched:
        if (p99 := seen.get(id(fit))) is not None:
            _latency_consistent(row, fit, p99)
    _search(runner, searched, max_throttled, max_p99_ms)
    if timings is not None:  # wall seconds; CPU seconds of this process (all of it with one worker, in-process)
        timings.update(
            fit_s=fitted - clock, search_s=time.monotonic() - fitted, fitted=len(fits), searched=len(searched),
            fit_cpu_s=fitted_cpu - cpu, search_cpu_s=time.process_time() - fitted_cpu,
        )
    return sorted(rows, key=lambda r: (r["namespace"], r["workload"], r["pod"], r["container"], r["id"]))


def _fit(runner: Batched, fits: list[Fit]) -> None:
    """Every fit's runs at once; each takes its own."""
    batch = [f.runs() for f in fits]
    docs = runner.run_many([run for runs in batch for run in runs])
    k = 0
    for fit, runs in zip(fits, batch):
        fit.take(docs[k : k + len(runs)])
        k += len(runs)


def _consistent(row: dict[str, Any], fit: Fit) -> bool:
    row["models"] = f"{len(fit.consistent_models)}/{fit.tried}"
    if fit.consistent and fit.unbounded:
        row["status"] = "refused"
        row["reason"] += (
            f"at its limit in every window ({100 * row['throttled_now']:.0f} % of periods throttled): its counters fit"
            f" demand from what the limit let through to {fit.demand_factors[-1]:g}x that, so they cannot say how much it needs;"
            " raise its limit for a while, or --capture it"
        )
        return False
    if fit.consistent:
        families = {m.family for m in fit.consistent_models}
        if "independent" not in families:
            kinds = [k for f, k in (("closed", "threads that run, then sleep"), ("aligned", "threads waking together")) if f in families]
            row["reason"] += f"no independent bursts reproduce its counters; {' and '.join(kinds)} do; "
        return True
    miss, model = fit.closest
    row["status"] = "refused"
    row["reason"] += f"no demand model reproduces its counters at its limit (closest: {model}, {miss:.1f}x its bound off)"
    if fit.biased_low:
        row["reason"] += f"; {fit.biased_low} within every band's bound were biased low over them"
    return False


def _observed_p99(row: dict[str, Any], seen: Optional[Observed], metric: str) -> Optional[Observed]:
    """The row's observed p99, where its histogram has one the model can move."""
    if seen is None:
        row["reason"] += f"no {metric} requests for it: p99 not predicted; "
        return None
    if math.isinf(seen.bucket_high_ms):
        row["reason"] += f"its p99 is in {metric}'s +Inf bucket (above {seen.bucket_low_ms:g} ms): p99 not predicted; "
        return None
    row["observed_p99_ms"] = round(seen.p99_ms, 3)
    return seen


def _latency_consistent(row: dict[str, Any], fit: Fit, seen: Observed) -> None:
    """A service model whose own p99 at the container's limit is above the top
    of the bucket the observed p99 lies in is ruled out: a request is at
    least its burst of CPU time, as the model has it. Where every service
    model is ruled out, they all stay (for the throttling) and the p99 is
    not predicted."""
    services = [v for v in fit.consistent if v.p99_us]
    fast = [v for v in services if max(v.p99_us) / 1e3 <= seen.bucket_high_ms]
    if services and not fast:
        row["observed_p99_ms"] = None
        row["reason"] += (
            f"p99 not predicted: every model that reproduces its counters has a p99 above its observed {seen.p99_ms:.1f} ms"
            f" (bucket up to {seen.bucket_high_ms:g} ms) at its limit, so its requests are not one burst each; "
        )
    elif len(fast) < len(services):
        row["reason"] += f"{len(services) - len(fast)} of {len(services)} model variants ruled out by its p99; "
        fit.consistent = [v for v in fit.consistent if v in fast or not v.p99_us]


def _search(runner: Runner, searched: list[tuple[dict[str, Any], Fit]], max_throttled: float, max_p99_ms: Optional[float] = None) -> None:
    """advise's bisection for every fitted container in lockstep, then every
    model at the recommendation (HEADROOM over the boundary) for its range."""
    from throttlelab.advise import bisect_all

    plans = [Plan(fit, max_throttled, row["observed_p99_ms"], max_p99_ms) for row, fit in searched]
    for (row, fit), plan in zip(searched, plans):
        if row["observed_p99_ms"] is not None and not plan.predicts_p99:
            row["reason"] += "p99 not predicted: the models that reproduce its counters serve no requests (threads that run, then sleep, or wake together); "
    candidates, _ = bisect_all(runner, None, [p.bisection() for p in plans], lambda: None, plans=plans)
    settings = [recommended(c, fit.cpus) for c, (_, fit) in zip(candidates, searched)]
    batch = [p.runs(s) for p, s in zip(plans, settings)]
    docs = runner.run_many([run for runs in batch for run in runs])
    k = 0
    for (row, fit), plan, candidate, setting, runs in zip(searched, plans, candidates, settings, batch):
        outcome = plan.outcome(docs[k : k + len(runs)])
        k += len(runs)
        quota_us, period_us, _ = setting
        if not candidate["meets"] or quota_us >= fit.cpus * period_us:
            row["status"] = "remove limit"
            row["reason"] += f"not even {fit.cpus} CPUs keep every consistent model at or below the target"
            if plan.predicts_p99 and max_p99_ms is not None and outcome.p99_ms is not None and outcome.p99_ms > max_p99_ms:
                row["reason"] += f" (p99 {outcome.p99_ms:.1f} ms predicted there, over --max-p99-ms {max_p99_ms:g}: the rest of its latency is not CPU)"
            continue
        if not outcome.meets:  # the boundary met it, its headroom did not: noise the row must show
            row["reason"] += "the worst model missed the target at the headroom above the boundary it met; "
        row.update(
            recommended_m=millicores(quota_us, period_us), predicted_throttled=outcome.throttled_ratio,
            predicted_low=outcome.best_ratio, predicted_high=outcome.throttled_ratio,
            predicted_p99_ms=None if outcome.p99_ms is None else round(outcome.p99_ms, 3),
        )


def _from_capture(row: dict[str, Any], result: dict[str, Any]) -> None:
    """advise's answer on the container's capture in place of the model."""
    rec = result["recommendation"]
    row["models"] = "capture"
    if result["remove_limit"] or rec is None:
        row["status"], row["reason"] = "remove limit", row["reason"] + "from its capture"
        return
    ratio = rec["holdout"]["throttled_ratio"]
    row.update(recommended_m=millicores(rec["quota_us"], rec["period_us"]), predicted_throttled=ratio, predicted_low=ratio, predicted_high=ratio)
    row["reason"] += f"from its capture ({result['target']['seeds']} seeds, checked on {len(result['holdout_seeds'])} more)"


def to_json(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    return json.dumps({**meta, "containers": rows}, sort_keys=False)


def to_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if r[k] is None else r[k] for k in COLUMNS})
    return out.getvalue()


def _pct(ratio: Optional[float]) -> str:
    return "" if ratio is None else f"{100 * ratio:.1f}"


def _ms(ms: Optional[float]) -> str:
    return "" if ms is None else f"{ms:.1f}"


def _name(row: dict[str, Any]) -> str:
    """pod/container, or the cgroup's id."""
    return f"{row['pod']}/{row['container']}" if row["pod"] and row["container"] else row["id"]


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[RenderableType]:
    """The table, grouped by workload, and what the statuses mean."""
    platform = PLATFORMS[meta["platform"]]
    latency = "latency_metric" in meta
    cols = ["container", "limit", "p50", "p95", "max", "thr. %", "advice", "pred. %", "range %", "models"] + (["p99 ms", "pred. p99"] if latency else [])
    target = f"target throttled <= {100 * meta['max_throttled']:g} %" + (f", p99 <= {meta['max_p99_ms']:g} ms" if latency and meta["max_p99_ms"] else "")
    t = table(
        f"{meta['prometheus']} {meta['selector'] or '(every container)'}: {meta['range']} at {meta['step']}, {target}", cols, left=("container", "advice"),
    )
    last = None
    for r in rows:
        if (r["namespace"], r["workload"]) != last:
            where = f"{r['namespace']}: " if r["namespace"] else ""
            t.add_row(f"[bold]{where}{r['workload']}[/bold]", *[""] * (len(cols) - 1))
            last = (r["namespace"], r["workload"])
        name = _name(r)
        limit = "no limit" if r["limit_m"] is None else f"{r['limit_m']}m"
        if r["recommended_m"] is not None:
            advice = platform.setting(r["recommended_m"] * r["period_us"] // 1000, r["period_us"], 0).removeprefix("limits.cpu ")
            spread = f"{_pct(r['predicted_low'])}-{_pct(r['predicted_high'])}"
        else:
            advice, spread = r["status"], ""
        t.add_row(
            f"  {name}", limit, f"{r['usage_p50_m']}m", f"{r['usage_p95_m']}m", f"{r['usage_max_m']}m",
            _pct(r["throttled_now"]), advice, _pct(r["predicted_throttled"]), spread, r["models"] or "",
            *([_ms(r["observed_p99_ms"]), _ms(r["predicted_p99_ms"])] if latency else []),
        )
    notes = [f"{_name(r)}: {r['reason']}" for r in rows if r["reason"]]
    commands = [f"  {_name(r)}: {capture_command(r['id'], short=True)}" for r in rows if r["capture"]]
    return [t, *notes, *(["To capture a container, on its node (then --capture NAME=FILE, NAME its namespace/pod/container or id):", *commands] if commands else [])]


def patch_yaml(rows: list[dict[str, Any]], command: str) -> str:
    """The recommended limits as strategic-merge patches, one document per
    workload (``kubectl patch KIND NAME -n NS --patch-file``, or a kustomize
    ``patches:`` entry); rows without a namespace and a container name (raw
    cgroups) are listed as comments."""
    by_workload: dict[tuple[str, str], list[dict[str, Any]]] = {}
    skipped = []
    for r in rows:
        if r["recommended_m"] is None:
            continue
        kind, _, name = r["workload"].partition("/")
        if kind in ("Deployment", "StatefulSet", "Pod") and r["namespace"] and r["container"]:
            by_workload.setdefault((r["namespace"], r["workload"]), []).append(r)
        else:
            skipped.append(f"# {r['id'] or r['container']}: {r['recommended_m']}m (no workload to patch)")
    docs = []
    for (namespace, wl), wrows in sorted(by_workload.items()):
        kind, _, name = wl.partition("/")
        api = "v1" if kind == "Pod" else "apps/v1"
        indent = "    " if kind == "Pod" else "        "
        seen, containers_yaml = set(), []
        for r in wrows:
            if r["container"] in seen:  # replicas: the largest recommendation
                continue
            seen.add(r["container"])
            m = max(x["recommended_m"] for x in wrows if x["container"] == r["container"])
            containers_yaml.append(f"{indent}- name: {r['container']}\n{indent}  resources:\n{indent}    limits:\n{indent}      cpu: {m}m")
        spec = "spec:\n  containers:\n" if kind == "Pod" else "spec:\n  template:\n    spec:\n      containers:\n"
        docs.append(f"apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: {namespace}\n{spec}" + "\n".join(containers_yaml))
    head = f"# {command}\n# resources.limits.cpu per container (strategic-merge patches)\n" + "".join(s + "\n" for s in skipped)
    return head + "---\n".join(d + "\n" for d in docs) if docs else head
