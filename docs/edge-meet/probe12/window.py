"""Off-grid charges of a host diff run's spinners near each refill: how far after their CPU's tick
and how far before the period timer's expiry.
    python window.py DIR/run-N.bw.txt PERIOD_MS"""
import re, sys, collections
from hosttrace import events, spinners
path=sys.argv[1]; P=float(sys.argv[2])/1e3
evs=events(path)
spin=spinners(evs)
pt=[t for t,cpu,ev,f,c,_ in evs if ev=='hrtimer_expire_entry' and 'sched_cfs_period_timer' in f]
print('period timer expiries', len(pt), 'spacing', [round((b-a)*1e3,3) for a,b in zip(pt,pt[1:])][:5])
lasttick={}; win=collections.Counter(); tot=0
import bisect
rows=[]
for t,cpu,ev,f,c,_ in evs:
    if ev=='hrtimer_expire_entry' and 'tick_' in f: lasttick[cpu]=t
    if ev=='sched_stat_runtime' and int(re.search(r'pid=(\d+)',f)[1]) in spin:
        d=t-lasttick.get(cpu,-1)
        if d>50e-6:
            i=bisect.bisect(pt,t)
            if i<len(pt):
                to_end=pt[i]-t
                rows.append((cpu, round(d*1e3,2), round(to_end*1e3,2), int(re.search(r'runtime=(\d+)',f)[1])/1e3))
tot=len(rows)
print('off-grid charges', tot)
# tick phase relative to period
ticks=[t for t,cpu,ev,f,c,_ in evs if ev=='hrtimer_expire_entry' and 'tick_' in f and cpu==0]
if pt:
    print('period end - last tick before it (ms):', sorted(set(round((p - max(x for x in ticks if x<p))*1e3,1) for p in pt[2:12])))
near=[r for r in rows if r[2]<4.0]
print('off-grid charges in the last 4 ms before a period end:', len(near))
for r in near: print('  cpu %d  %.2f ms after its tick, %.2f ms before the refill, charge %.1f us'%r)
