"""Per period of a `throttlelab trace` file: demand, longest worker burst, overlap, throttling."""
import json, sys, collections
d = json.load(open(sys.argv[1])); ev = d['traceEvents'] if isinstance(d, dict) else d
period_us = float(sys.argv[2]) if len(sys.argv) > 2 else 200000
refills = sorted(e['ts'] for e in ev if e.get('ph') == 'i' and e['name'].startswith('refill'))
runs = sorted([(e['ts'], e['ts'] + e['dur'], e['name']) for e in ev if e.get('ph') == 'X' and e.get('cat') == 'run'])
thr = [(e['ts'], e['ts'] + e['dur']) for e in ev if e.get('ph') == 'X' and e.get('cat') == 'throttled']
# merge a thread's adjacent slices (preemption) into bursts
bursts = collections.defaultdict(list)
for s, t, n in runs:
    b = bursts[n]
    if b and s - b[-1][1] < 50: b[-1][1] = max(b[-1][1], t)
    else: b.append([s, t])
workers = [n for n in bursts if n != '[background]' and n != min(bursts, key=lambda n: sum(t - s for s, t in bursts[n]))]
print('threads', {n: (len(b), round(sum(t - s for s, t in b) / 1e3)) for n, b in bursts.items()}, 'workers', workers)
edges = refills + [refills[-1] + period_us]
print('period_start_ms demand_ms longest_worker_burst_ms both_workers_running_ms throttled_ms')
for a, b in zip(edges, edges[1:]):
    dem = sum(max(0, min(t, b) - max(s, a)) for s, t, n in runs if n != '[background]')
    longest = max([min(t, b) - max(s, a) for n in workers for s, t in bursts[n] if t > a and s < b] or [0])
    # both workers on CPU at once
    iv = [[max(s, a), min(t, b)] for s, t in bursts[workers[0]] if t > a and s < b]
    jv = [[max(s, a), min(t, b)] for s, t in bursts[workers[1]] if t > a and s < b]
    both = sum(max(0, min(x[1], y[1]) - max(x[0], y[0])) for x in iv for y in jv)
    th = sum(max(0, min(t, b) - max(s, a)) for s, t in thr)
    print(f'{a/1e3:8.0f} {dem/1e3:7.1f} {longest/1e3:7.1f} {both/1e3:7.1f} {th/1e3:7.1f}' + ('  THROTTLED' if th else ''))
