"""What charges the spinners of a host diff run off the tick grid: each `sched_stat_runtime` more
than 50 us after its CPU's tick, by the event before it on that CPU; and who switched them out.
    python charges.py DIR/run-N.bw.txt ..."""
import re, sys, collections
from hosttrace import events, spinners
for path in sys.argv[1:]:
    evs=events(path)
    spin=spinners(evs)
    last=collections.defaultdict(dict); cause=collections.Counter(); n=0
    t0=None;t1=None
    prev_ev=collections.defaultdict(lambda: None)
    for t,cpu,ev,f,comm,pid in evs:
        if ev=='hrtimer_expire_entry' and 'tick_' in f: last[cpu]['tick']=t
        if ev=='sched_stat_runtime':
            p=int(re.search(r'pid=(\d+)',f)[1])
            if p in spin:
                t0=t0 or t; t1=t; n+=1
                lt=last[cpu]
                if 'tick' in lt and t-lt['tick']<50e-6: k='tick'
                else: k='off:'+str(prev_ev[cpu])
                cause[k]+=1
        if ev=='sched_switch':
            m=re.search(r'prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)',f)
            who='spin' if int(m[2]) in spin else 'other'
            prev_ev[cpu]=f'switch({who} {m[3]} -> {"spin" if int(m[5]) in spin else m[4]})'
        elif ev!='sched_stat_runtime' and not ev.startswith('hrtimer'):
            prev_ev[cpu]=ev
        elif ev=='hrtimer_expire_entry':
            prev_ev[cpu]='timer '+re.search(r'function=(\S+)',f)[1]
    dur=t1-t0
    print(path, 'spinners',spin,'dur %.2f s'%dur,'charges',n)
    for k,v in cause.most_common(12): print('   %5d %6.1f/s/cpu %s'%(v, v/dur/2, k))
    # switches of spinners
    sw=collections.Counter()
    for t,cpu,ev,f,comm,pid in evs:
        if ev=='sched_switch':
            m=re.search(r'prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)',f)
            if int(m[2]) in spin: sw[(m[3], m[4])]+=1
    print('  spinner switched out:', sw.most_common(10))
