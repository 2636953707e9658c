"""Replay fair.c's bandwidth accounting (6.18: __account_cfs_rq_runtime, assign_cfs_rq_runtime,
__refill_cfs_bandwidth_runtime) from a host trace's own charges (sched_stat_runtime of the spinners)
and period timer expiries, from each start state in a grid; print the throttles each predicts."""
import re, sys, collections, itertools
from hosttrace import events, spinners
path=sys.argv[1]; quota=float(sys.argv[2])*1e3  # quota in us -> ns below
quota_ns=int(float(sys.argv[2])*1000); slice_ns=5_000_000
evs=events(path)
spin=set(spinners(evs))
stream=[]
for t,cpu,ev,f,_,_ in evs:
    if ev=='hrtimer_expire_entry' and 'sched_cfs_period_timer' in f: stream.append((t,'refill',None,0))
    elif ev=='sched_stat_runtime':
        pid=int(re.search(r'pid=(\d+)',f)[1])
        if pid in spin: stream.append((t,'charge',cpu,int(re.search(r'runtime=(\d+)',f)[1])))
first_refill=next(i for i,s in enumerate(stream) if s[1]=='refill')
stream=stream[first_refill:]
def replay(pool0, r0):
    pool=pool0; r=dict(r0); thr={0:False,1:False}; out=[]; periods_thr=0; any_thr=False
    for t,kind,cpu,d in stream:
        if kind=='refill':
            if any(thr.values()): periods_thr+=1
            pool=quota_ns
            for c in (0,1):
                if thr[c]:
                    give=min(pool, -r[c]+1); pool-=give; r[c]+=give
                    if r[c]>0: thr[c]=False
            continue
        if thr[cpu]: continue
        r[cpu]-=d
        if r[cpu]>0: continue
        give=min(slice_ns-r[cpu], pool); pool-=give; r[cpu]+=give
        if r[cpu]<=0:
            thr[cpu]=True; out.append((round(t,4),cpu))
    return periods_thr, out
res=collections.Counter()
examples={}
for p0 in range(0, quota_ns+1, quota_ns//8):
    for a,b in itertools.product(range(1,5_000_001,1_000_000), repeat=2):
        n,out=replay(p0,{0:a,1:b})
        res[n]+=1; examples.setdefault(n,out)
print('refills', sum(1 for s in stream if s[1]=='refill'), 'charges', sum(1 for s in stream if s[1]=='charge'))
print('throttled periods predicted over start states:', sorted(res.items()))
for n in sorted(examples)[:3]: print(n, examples[n][:10])
# The kernel's grants in periods 8-11 from one start state, and its charges there.
def grants(pool0, r0, lo, hi):
    pool=pool0; r=dict(r0); thr={0:False,1:False}; k=-1; t0=None
    for t,kind,cpu,d in stream:
        if kind=='refill':
            k+=1; t0=t; pool=quota_ns
            if lo<=k<=hi: print(f'--- period {k}')
            continue
        if not (lo<=k<=hi):
            r[cpu]-=d
            if r[cpu]<=0:
                give=min(slice_ns-r[cpu], pool); pool-=give; r[cpu]+=give
            continue
        r[cpu]-=d
        note=''
        if r[cpu]<=0:
            give=min(slice_ns-r[cpu], pool); pool-=give; r[cpu]+=give; note=f'assign {give/1e3:.1f} us'
        print(f'  +{(t-t0)*1e3:7.3f} ms cpu{cpu} charge {d/1e3:7.1f} us  r={r[cpu]/1e3:7.1f} {note}')
if len(sys.argv)>3:
    lo,hi=map(int,sys.argv[3].split('-')); grants(quota_ns//2,{0:1,1:1},lo,hi)
