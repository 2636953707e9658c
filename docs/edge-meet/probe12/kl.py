import re, sys, collections, json
line = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$")
allv=[]; rate=[]
for path in sys.argv[1:]:
    evs=[]
    for l in open(path):
        m=line.match(l)
        if m: evs.append((float(m[4]), int(m[3]), m[5], m[6]))
    rt=collections.Counter()
    for t,cpu,ev,f in evs:
        if ev=='sched_stat_runtime':
            rt[int(re.search(r'pid=(\d+)',f)[1])]+=1
    spin=[p for p,_ in rt.most_common(2)]
    off={}; lens=[]
    ts=[t for t,cpu,ev,f in evs if ev=='sched_stat_runtime']
    for t,cpu,ev,f in evs:
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
