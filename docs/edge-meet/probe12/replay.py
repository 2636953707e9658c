"""Root tasks, one pinned to each CPU, that replay a host diff run's preemptions of its spinners
(their starts and lengths) in a loop: appended to a scenario, the simulator meets the same background.
    python replay.py DIR/run-N.bw.txt > replay.toml"""
import re, sys, collections
from hosttrace import events, spinners
path=sys.argv[1]
evs=events(path)
spin=spinners(evs)
ts=[t for t,cpu,ev,f,_,_ in evs if ev=='sched_stat_runtime' and int(re.search(r'pid=(\d+)',f)[1]) in spin]
t0,t1=min(ts),max(ts)
off={}; pre=collections.defaultdict(list)
for t,cpu,ev,f,_,_ in evs:
    if ev=='sched_switch':
        m=re.search(r'prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)',f)
        pp,np=int(m[1]),int(m[4])
        if pp in spin and m[2]=='R': off[pp]=(t,cpu)
        if np in spin and np in off:
            s,c=off.pop(np)
            if t0+0.05<s<t1: pre[c].append((s,(t-s)))
out=[]
for c in sorted(pre):
    ph=[]; last=t0+0.05
    for s,l in pre[c]:
        ph.append('{ sleep_us = %d }'%max(1,round((s-last)*1e6))); ph.append('{ run_us = %d }'%max(1,round(l*1e6))); last=s+l
    ph.append('{ sleep_us = %d }'%max(1,round((t1-last)*1e6)))
    out.append('\n[[task]]\nname = "replay%d"\ncpus = "%d"\nphases = [%s]\n'%(c,c,', '.join(ph)))
    print('# cpu',c,len(pre[c]),'preemptions, %.1f ms'%(sum(l for s,l in pre[c])*1e3),'over %.2f s'%(t1-t0-0.05), file=sys.stderr)
print(''.join(out))
