"""The host's background as `sched_switch` shows it, in the probe's 0.5 s and in
the kernel runs that follow it: docs/fidelity.md's "The background's shape,
traced through the probe and the runs" (bgshape7).

    d=docs/edge-diff/bgshape7
    python $d/analyse.py $d/trace.txt.gz $d/compare-20.json $d/compare-30.json
    python $d/analyse.py $d/trace-burst0.txt.gz $d/fresh-burst0.json

reads a trace (hold.sh's or hold2.sh's own tracefs instance: sched_switch and
sched_migrate_task on every CPU) and what each probe reported, in order: a
`compare --json`'s runs, or a grid JSON's rows (fresh_rows.py: a row's 5 runs,
its mean rate and length and the median of its probes' medians).

The subjects: a run's spinners (comm ``throttlelab-wor``, over 300 ms on the
CPU) and the probe's spinners (threads of the process that runs the real backend:
``throttlelab`` for compare, ``python`` for fresh_rows.py, ``throttlelab-rea``
for the binary; over 300 ms
on their CPU in under 1 s). A preemption is a switch away from a subject in
state R to a task that is not a subject. Its length is read two ways:

- until back: until a subject runs on that CPU again (edge6's reading);
- the other tasks' run: until the CPU runs a subject or goes idle. A worker
  that is throttled or pulled away while another task runs does not come
  back when that task ends, and "until back" counts its wait too.

Per window kind (probe, run) it prints the rate per CPU-second, the median,
mean, p90 and p99 of each length, a histogram, the tasks that preempted (by
count and by time), and per probe the trace's count against the probe's
``ru_nivcsw`` rate and its mean and median. The harness's own threads (the
real backend's controller, a worker process's other threads) are named
apart: the simulator's scenario has no harness.

A task whose own switches away are never in the trace (on the fidelity host,
``tokio-rt-worker``: 220 switches to it, 3 away) hides the end of the
preemptions it is in: those are counted apart, without a length.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>\d+)\.(?P<frac>\d+): (?P<event>\w+): (?P<body>.*)$")
SWITCH = re.compile(r"prev_comm=(?P<pc>.*) prev_pid=(?P<pp>\d+) prev_prio=\d+ prev_state=(?P<ps>\S+) ==> "
                    r"next_comm=(?P<nc>.*) next_pid=(?P<np>\d+) next_prio=\d+")
WORKER, HARNESS = "throttlelab-wor", ("throttlelab", "throttlelab-rea")
SUBJECT_NS = 300_000_000  # a spinner's least time on its CPU in one window
BINS_US = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000]


def switches(text: str):
    """(t ns, cpu, prev pid, prev comm, prev state, next pid, next comm) of every sched_switch, and the markers."""
    out, marks = [], []
    for line in text.splitlines():
        m = LINE.match(line)
        if m is None:
            continue
        t = int(m["ts"]) * 1_000_000_000 + int(m["frac"]) * 10 ** (9 - len(m["frac"]))
        if m["event"] == "tracing_mark_write":
            marks.append((t, m["body"].strip()))
        elif m["event"] == "sched_switch":
            s = SWITCH.match(m["body"])
            out.append((t, int(m["cpu"]), int(s["pp"]), s["pc"], s["ps"], int(s["np"]), s["nc"]))
    return out, marks


def runtimes(sw):
    """pid -> cpu -> ns run, and pid -> comm, and pid -> (first in, last out)."""
    run = defaultdict(lambda: defaultdict(int))
    comm, span = {}, {}
    since = {}
    for t, cpu, pp, pc, _ps, np_, nc in sw:
        if cpu in since and since[cpu][0] == pp:
            run[pp][cpu] += t - since[cpu][1]
            span[pp] = (span[pp][0], t)
        since[cpu] = (np_, t)
        comm[np_] = nc
        span.setdefault(np_, (t, t))
    return run, comm, span


def windows(subjects: set[int], span, gap_ns: int = 500_000_000):
    """[start, end) of each stretch where subjects ran, split at gaps over gap_ns."""
    spans = sorted(span[p] for p in subjects)
    out = []
    for a, b in spans:
        if out and a - out[-1][1] < gap_ns:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def preemptions(sw, subjects: set[int], lo: int, hi: int):
    """Each preemption of a subject in [lo, hi): (cpu, t, until back ns, the other tasks' run ns, next comm, {comm: ns})."""
    open_ = {}  # cpu -> [t0, next comm, ran {comm: ns}, others' end or None, current (comm, since)]
    out = []
    for t, cpu, pp, pc, ps, np_, nc in sw:
        if not lo <= t < hi:
            continue
        p = open_.get(cpu)
        if p is not None and pp in subjects:
            # The subject runs again but its switch back is not in the trace (a task
            # whose own switches away are never recorded ran in between): length unknown.
            out.append((cpu, p[0], None, None, p[1], dict(p[2])))
            del open_[cpu]
            p = None
        if p is not None:
            cur, since = p[4]
            if cur is not None:
                p[2][cur] += t - since
            if np_ in subjects:
                end = p[3] if p[3] is not None else t
                out.append((cpu, p[0], t - p[0], end - p[0], p[1], dict(p[2])))
                del open_[cpu]
                continue
            if np_ == 0 or nc.startswith("swapper"):
                p[3] = p[3] if p[3] is not None else t
                p[4] = (None, t)
            else:
                p[4] = (nc if p[3] is None else None, t)
            continue
        if pp in subjects and ps.startswith("R") and np_ not in subjects and np_ != 0:
            open_[cpu] = [t, nc, Counter(), None, (nc, t)]
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def summary(label, pre, cpu_s):
    unseen = Counter(p[4] for p in pre if p[2] is None)
    pre = [p for p in pre if p[2] is not None]
    print(f"{label}: {sum(unseen.values())} preemptions whose end the trace does not show (next: {dict(unseen)})")
    back = [p[2] / 1e3 for p in pre]
    run = [p[3] / 1e3 for p in pre]
    print(f"{label}: {len(pre)} preemptions with their end in {cpu_s:.2f} CPU-s, {len(pre) / cpu_s:.1f} a CPU-second")
    for name, xs in (("until back", back), ("others' run", run)):
        if xs:
            print(f"  {name:12s} median {statistics.median(xs):7.1f} us, mean {statistics.mean(xs):7.1f}, "
                  f"p90 {pct(xs, .9):7.1f}, p99 {pct(xs, .99):8.1f}, max {max(xs):8.1f}")
    edges = [0, *BINS_US, math.inf]
    for name, xs in (("until back", back), ("others' run", run)):
        counts = [sum(a <= x < b for x in xs) for a, b in zip(edges, edges[1:])]
        cells = ", ".join(f"<{b:g}: {c}" if b != math.inf else f">={a:g}: {c}" for (a, b), c in zip(zip(edges, edges[1:]), counts))
        print(f"  histogram, {name} (us): {cells}")
    by_next = Counter(p[4] for p in pre)
    by_time = Counter()
    for p in pre:
        by_time.update(p[5])
    print("  next task, by count: " + ", ".join(f"{c} {n}" for c, n in by_next.most_common(8)))
    print("  tasks run in them, by us: " + ", ".join(f"{c} {n / 1e3:.0f}" for c, n in by_time.most_common(8)))
    return back, run


def lognormal_quantiles(p50, mean):
    """The engine's draw (noise::log_normal): median p50, mean `mean`."""
    sigma = math.sqrt(2 * math.log(mean / p50)) if mean > p50 else 0.0
    return {q: p50 * math.exp(sigma * z) for q, z in ((0.9, 1.2816), (0.99, 2.3263))}, sigma


def reported(paths: list[Path]):
    """(label, windows, host) per probe report: a compare's runs one by one,
    a grid row's runs (fresh_rows.py) together, with the row's means and its
    median of the probes' medians."""
    out = []
    for path in paths:
        doc = json.loads(path.read_text())
        if "kernel_runs" in doc:
            out += [(f"{path.stem} run {k + 1}", 1, r["host"]) for k, r in enumerate(doc["kernel_runs"])]
        else:
            out += [(f"{r['threads']} threads, {r['period_us'] // 1000} ms, burst {int(r['burst_us'] > 0)}", len(r["kernel_ratio"]),
                     {k: r.get(k) for k in ("background_per_s", "background_us", "background_p50_us")}) for r in doc["rows"]]
    return out


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main(trace: Path, reports: list[Path]) -> None:
    text = gzip.open(trace, "rt").read()
    sw, marks = switches(text)
    run, comm, span = runtimes(sw)
    big = {p for p, per in run.items() if max(per.values()) > SUBJECT_NS}
    workers = {p for p in big if comm.get(p) == WORKER}
    # The probe's threads live 0.5 s; the process that runs compare is the harness.
    probes = {p for p in big - workers if comm.get(p) in HARNESS + ("python",) and span[p][1] - span[p][0] < 1_000_000_000}
    print(f"{len(sw)} switches; markers: {[m for _t, m in marks]}")
    print(f"subjects: {len(workers)} worker spinners, {len(probes)} probe spinners; others over 300 ms: "
          f"{sorted((comm[p], p) for p in big - workers - probes)}")
    groups = reported(reports)
    cpus = 2
    probe_w = windows(probes, span)
    run_w = windows(workers, span)
    print(f"probe windows {len(probe_w)}, run windows {len(run_w)}, probes reported {sum(n for _l, n, _h in groups)}")
    allp, allr = [], []
    at = 0
    for label, n, h in groups:
        pw, rw = probe_w[at:at + n], run_w[at:at + n]
        at += n
        inv, medians, pooled, cs_p, pr, cs_r = 0, [], [], 0.0, [], 0.0
        for (pa, pb), (ra, rb) in zip(pw, rw):
            pp = preemptions(sw, probes, pa, pb)
            rr = preemptions(sw, workers, ra, rb)
            allp += pp
            allr += rr
            # The probe's nivcsw count is every switch away in state R, whatever comes next.
            inv += sum(1 for t, _cpu, p_, _pc, ps, _np, _nc in sw if pa <= t < pb and p_ in probes and ps.startswith("R"))
            lengths = [p[2] / 1e3 for p in pp if p[2] is not None]
            medians += [med(lengths)] if lengths else []
            pooled += lengths
            pr += [p for p in rr if p[2] is not None]
            cs_p += cpus * (pb - pa) / 1e9
            cs_r += cpus * (rb - ra) / 1e9
        br = [p[2] / 1e3 for p in pr]
        p50 = h.get("background_p50_us")
        print(f"{label}: probe said {h['background_per_s']:.1f}/s x {h['background_us']:.0f} us, median "
              f"{p50 if p50 is None else round(p50)} us; trace in its window: {inv / cs_p:.1f}/s switched away runnable, "
              f"median {med(medians):.0f} us (pooled {med(pooled):.0f}), mean {statistics.mean(pooled) if pooled else float('nan'):.0f} "
              f"with its end seen; the run: {len(pr) / cs_r:.1f}/s, median {med(br):.0f} mean {statistics.mean(br) if br else float('nan'):.0f}")
    cs_p = sum(cpus * (b - a) / 1e9 for a, b in probe_w[:at])
    cs_r = sum(cpus * (b - a) / 1e9 for a, b in run_w[:at])
    print()
    summary("probe windows, all", allp, cs_p)
    print()
    summary("run windows, all", allr, cs_r)
    harness = [p for p in allr if p[4] in HARNESS or p[4] == WORKER]
    print(f"  of them the harness's own threads next ({HARNESS}, or a worker process's thread that is not a spinner): {len(harness)}")
    print()
    # What the engine draws from the probes' summary, as compare combines it.
    hosts = [h for _l, n, h in groups for _ in range(n)]
    per_s = statistics.fmean(h["background_per_s"] for h in hosts)
    mean = sum(h["background_per_s"] * h["background_us"] for h in hosts) / (per_s * len(hosts))
    p50 = med([h["background_p50_us"] for h in hosts if h.get("background_p50_us") is not None])
    q, sigma = lognormal_quantiles(p50, mean)
    print(f"the probes combined: {per_s:.1f}/s, mean {mean:.0f} us, median {p50:.0f} us: log-normal sigma {sigma:.2f}, "
          f"p90 {q[0.9]:.0f} us, p99 {q[0.99]:.0f} us, below 100 us {lognormal_below(p50, sigma, 100):.0%}, "
          f"100-500 us {lognormal_below(p50, sigma, 500) - lognormal_below(p50, sigma, 100):.0%}")
    for lo, hi in ((0, 100), (100, 500), (500, math.inf)):
        for name, pre in (("probe windows", allp), ("run windows", allr)):
            xs = [p[2] / 1e3 for p in pre if p[2] is not None]
            print(f"  {name}: {lo}-{hi} us {sum(lo <= x < hi for x in xs) / len(xs):.0%}", end=";")
        print()


def lognormal_below(p50, sigma, x):
    """The log-normal's share below x us."""
    return 0.5 * (1 + math.erf(math.log(x / p50) / (sigma * math.sqrt(2)))) if sigma > 0 else float(x > p50)


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(a) for a in sys.argv[2:]])
