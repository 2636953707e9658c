#!/usr/bin/env python3
"""A pgbench capture's shape (prom5, #35): each backend's requests (an
`until_us` and the CPU after it, up to the next: requests under 1 ms, the
background processes' wake-ups, left out), their cost's distribution, the
arrivals' rate and the gaps' coefficient of variation (1 for Poisson), the
share of 100 ms periods whose arriving requests ask more than 30 and 40.6 ms,
and every thread's CPU and wake-ups to or from a sibling.
    python docs/prometheus-live/run-2-prom5/shape.py FILE.phases.gz ...
"""

import gzip
import statistics as st
import sys

def sections(path):
    out, name = {}, None
    for line in gzip.open(path, "rt"):
        line = line.strip()
        if not line or line.startswith("#"): continue
        if line.startswith("["): name = line[1:-1]; out[name] = []; continue
        out[name].append(line.split())
    return out
for path in sys.argv[1:]:
    secs = sections(path)
    reqs = []  # (arrival_us, cost_us)
    for name, ph in secs.items():
        cur = None
        for p in ph:
            if p[0] == "until_us":
                if cur: reqs.append(tuple(cur))
                cur = [int(p[1]), 0]
            elif p[0] == "run_us" and cur is not None:
                cur[1] += int(p[1])
        if cur: reqs.append(tuple(cur))
    reqs = [r for r in reqs if r[1] > 1000]
    costs = sorted(c for _, c in reqs)
    q = lambda p: costs[min(len(costs)-1, int(p*len(costs)))]
    print(path, "requests", len(reqs), "mean cost ms %.2f" % (st.mean(costs)/1e3), "cv %.2f" % (st.pstdev(costs)/st.mean(costs)),
          "p10/p50/p90/p99/max ms", [round(q(p)/1e3,2) for p in (.1,.5,.9,.99)], round(costs[-1]/1e3,2))
    arr = sorted(a for a, _ in reqs)
    gaps = [b - a for a, b in zip(arr, arr[1:])]
    print("  rate/s %.1f, gap cv %.2f" % (len(arr) / (arr[-1]-arr[0]) * 1e6, st.pstdev(gaps)/st.mean(gaps)))
    # per-100ms-period demand, each request's CPU at its arrival
    per = {}
    for a, c in reqs: per[a // 100000] = per.get(a // 100000, 0) + c
    n = int(arr[-1] // 100000) + 1
    d = [per.get(i, 0) / 1e3 for i in range(n)]
    for lim in (30, 40.6):
        print(f"  periods with >{lim} ms arriving: {sum(x > lim for x in d) / n:.3f}")
    print("  per-period demand mean %.1f ms sd %.1f" % (st.mean(d), st.pstdev(d)))
    # other threads' CPU
    for name, ph in secs.items():
        tot = sum(int(p[1]) for p in ph if p[0] == "run_us")
        print("  ", name, "cpu s %.3f" % (tot/1e6), "phases", len(ph), "waits/wakes", sum(p[0] in ("wait","wake") for p in ph))
