"""Throttled periods and usage of a scenario over seeds 1-20, for each set of --set overrides given
(one quoted argument per set, keys separated by spaces).
    python sw.py SCENARIO "machine.background_per_s=27 machine.background_us=300" ..."""
import subprocess, json, statistics, sys
def run(base, seed, sets):
    args=['throttlelab','run',base,'--json','--set',f'seed={seed}']+sum([['--set',s] for s in sets],[])
    return json.loads(subprocess.run(args,capture_output=True,text=True,check=True).stdout)['cgroups']['app']
base=sys.argv[1]
for spec in sys.argv[2:]:
    sets=spec.split() if spec else []
    rs=[run(base,s,sets) for s in range(1,21)]
    print(base.split('/')[-1], sets, 'thr%', round(statistics.mean(r['throttled_ratio'] for r in rs)*100,1), 'usage', round(statistics.mean(r['usage_usec'] for r in rs)/1e6,4), flush=True)
