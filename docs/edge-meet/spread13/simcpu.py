"""Each thread's CPU time per CPU in the simulator (its Switch records), for 5 seeds of each
profile:  python simcpu.py SCENARIO 6.18,6.12,5.14 [OVERRIDE...]"""
import json, collections, sys
from throttlelab import _native
def cpu_time(text, overrides):
    recs=[]
    for n,chunk in _native.trace(text, overrides):
        d=json.loads(chunk)
        for x in (d if isinstance(d,list) else [d]):
            recs+=x['records']
    cur={}; last={}; c=collections.Counter()
    for r in recs:
        if r['kind']=='switch':
            cpu=r['cpu']
            if cur.get(cpu) is not None: c[(cur[cpu],cpu)]+=r['t_ns']-last[cpu]
            cur[cpu]=r.get('arg'); last[cpu]=r['t_ns']
    return {k:round(v/1e9,2) for k,v in sorted(c.items()) if k[0]<4}
text=open(sys.argv[1]).read()
for prof in sys.argv[2].split(','):
    for seed in range(1,6):
        print(prof, seed, cpu_time(text, [f"seed={seed}", f"kernel.profile={prof}"]+sys.argv[3:]))
