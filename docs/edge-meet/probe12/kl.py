"""The lengths of the spinners' preemptions (switched out runnable, back in) in host diff runs:
their rate per CPU-second, mean and median (JSON), then 64 quantiles (for machine.background_lengths_us).
    python kl.py DIR/run-N.bw.txt ..."""
import re, sys, collections, json
from hosttrace import events, spinners
allv=[]; rate=[]
for path in sys.argv[1:]:
    evs=events(path)
    spin=spinners(evs)
    off={}; lens=[]
    ts=[t for t,cpu,ev,f,_,_ in evs if ev=='sched_stat_runtime']
    for t,cpu,ev,f,_,_ in evs:
        if ev=='sched_switch':
            m=re.search(r'prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)',f)
            pp,np=int(m[1]),int(m[4])
            if pp in spin and m[2]=='R': off[pp]=t
            if np in spin and np in off: lens.append((t-off.pop(np))*1e6)
    dur=max(ts)-min(ts)
    rate.append(len(lens)/dur/2); allv+=lens
allv.sort()
print(json.dumps({'per_s': sum(rate)/len(rate), 'n': len(allv), 'mean': sum(allv)/len(allv), 'p50': allv[len(allv)//2]}))
q=[round(allv[int((i+0.5)*len(allv)/64)],1) for i in range(64)]
print(json.dumps(q))
