"""At a period boundary that falls on a tick (6.1: the period timer on multiples of the period, the
ticks on multiples of 4 ms), which ran first: the other CPU's tick or the period timer's refill, and
did that CPU throttle at the boundary (within 1 ms). Only boundaries where both ran within 0.5 ms of
their programmed time. Usage: boundary.py RUN.bw.txt..."""
import sys
from periods import timers

def boundaries(path):
    ticks, expiries, throttles = timers(path)
    rows = {"tick first": [0, 0], "refill first": [0, 0]}
    gaps = []
    for exp, now, cpu in expiries:
        other = 1 - cpu
        t = ticks.get((other, exp))
        if not t or not t[1] or now - exp > 500_000 or t[0] - exp > 500_000:
            continue
        first = "tick first" if t[0] < now else "refill first"
        thr = any(c == other and abs(x - exp) < 1_000_000 for x, c in throttles)
        rows[first][0] += 1
        rows[first][1] += thr
        gaps.append((t[0] - now) / 1e3)
    gaps.sort()
    print(path, {k: f"{n} boundaries, {t} throttled" for k, (n, t) in rows.items()},
          "other CPU's tick - refill us: p10/median/p90", [round(gaps[int(p * (len(gaps) - 1))], 1) for p in (.1, .5, .9)] if gaps else None)

if __name__ == "__main__":
    for p in sys.argv[1:]:
        boundaries(p)
