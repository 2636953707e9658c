"""What a late tick does to a lone spinner's throttle, in a guest's trace (`diff -o`, run-N.bw.txt):
for each tick of the worker's CPU programmed 2 ms before a period's programmed expiry (on 6.1 both
sit on CLOCK_MONOTONIC multiples: 4 ms and 10 ms), whether it ran late (> 0.5 ms), whether the
period timer's expiry ran in the same interrupt, and whether the period throttled, and the next.
Usage: late_periods.py RUN.bw.txt..."""
import sys
from periods import timers

def table(path):
    ticks, expiries, throttles = timers(path)
    throttles = [t for t, _ in throttles]
    counts = {}
    for i, (exp, now, cpu) in enumerate(expiries[:-1]):
        t = ticks.get((cpu, exp - 2_000_000))
        if not t or not t[1]:
            continue   # no tick of the worker's 2 ms before this expiry (the other kind of period)
        late = t[0] - (exp - 2_000_000) > 500_000
        same_irq = late and abs(t[0] - now) < 200_000
        prev = expiries[i - 1][1] if i else 0
        thr_here = any(prev < x <= now for x in throttles)
        thr_next = any(now < x <= expiries[i + 1][1] for x in throttles)
        key = ("late" if late else "on time") + (", with the period timer" if same_irq else "")
        c = counts.setdefault(key, [0, 0, 0])
        c[0] += 1; c[1] += thr_here; c[2] += thr_next
    print(path)
    for k, (n, h, nx) in counts.items():
        print(f"  the tick 2 ms before the refill {k}: {n} periods; throttled in it {h}, in the next {nx}")

if __name__ == "__main__":
    for p in sys.argv[1:]:
        table(p)
