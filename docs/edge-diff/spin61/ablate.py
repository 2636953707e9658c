"""The 6.1 edge grid's spinner row without burst (THREADS, PERIOD_US), its stored host fields
ablated one at a time (20 seeds each, set up like the guest as the grid is; `alone`: the scenario
as written). Usage: ablate.py THREADS PERIOD_US [VARIANT...]"""
import json, sys, statistics, copy
import os
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..')
sys.path.insert(0, os.path.join(ROOT, 'scripts'))
from fidelity_grid import scenario_text, stored_runs
from throttlelab.compare import simulator_runs
d = json.load(open(os.path.join(ROOT, 'docs', 'fidelity-edge-6.1.json')))
threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
period = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
row = next(r for r in d['rows'] if r['workload']=='spin' and r['period_us']==period and r['burst_us']==0 and r['threads']==threads)
config = {k: row[k] for k in ('workload','threads','period_us','quota_us','burst_us')}
text = scenario_text(config, 2.0)
base = stored_runs(d['host'], row)
def variant(drop=(), setkv=None, sets=()):
    runs = copy.deepcopy(base)
    for r in runs:
        for k in drop: r['host'].pop(k, None)
        if setkv: r['host'].update(setkv)
    return runs, list(sets)
variants = {
 'full': variant(),
 '-tick_late': variant(['tick_late']),
 '-work_speed': variant(['work_speed','work_speed_cv']),
 '-wakeup_cost': variant(['wakeup_cost_us','run_sleep_work_speed']),
 '-timer_offset': variant(['period_timer_offset_us']),
 'release6.18': variant(setkv={'release':'6.18.0'}),
 'phase0': variant(sets=['machine.tick_phase_us=0']),
 '-tick_late,phase0': variant(['tick_late'], sets=['machine.tick_phase_us=0']),
 'irq90': variant(sets=['machine.tick_irq_us=90']),
 '-tick_late,irq90': variant(['tick_late'], sets=['machine.tick_irq_us=90']),
 'alone': None,
 'alone,phase0': None,
}
only = sys.argv[3:] 
from fidelity_grid import scenario_alone
from throttlelab.runner import Runner, Run
for name, v in variants.items():
    if only and name not in only: continue
    if v is None:
        sets = ['machine.tick_phase_us=0'] if 'phase0' in name else []
        with Runner() as r: out = r.run_many([Run(text, [*sets, f'seed={i+1}']) for i in range(20)], lambda: None)
    else:
        runs, sets = v
        out = simulator_runs(text, runs, overrides=sets, seeds=20)
    ratio = [o['cgroups']['app']['throttled_ratio'] for o in out]
    ms = [o['cgroups']['app']['throttled_usec']/1e3 for o in out]
    print(f"{name:16s} ratio mean {statistics.fmean(ratio):.3f} median {statistics.median(ratio):.3f}  throttled ms {statistics.fmean(ms):.1f}  per-throttle ms {sum(ms)/max(1e-9, sum(r*2e6/period for r in ratio)):.2f}", flush=True)
print('kernel', row['kernel_ratio'], row['kernel_throttled_ms'])
print('host keys', sorted(base[0]['host'].keys()))
