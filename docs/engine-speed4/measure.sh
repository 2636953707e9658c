#!/bin/bash
# issue 36 / speed4: main (0724efc, its installed package copied to /tmp/speed4-base/site
# before any change) and the branch (speed4, /work/venvs/perf), alternating, in one
# tl-measure hold: the busy built-ins, advise request-service, a 60 s synthetic capture
# of 64 threads on 64 CPUs (synth_capture64.py), and the parallel-seeds comparison.
cd /tmp
out=/tmp/speed4-hold
mkdir -p $out
py=/work/venvs/perf/bin/python
tl=/work/venvs/perf/bin/throttlelab
use() { if [ $1 = main ]; then export PYTHONPATH=/tmp/speed4-base/site; else unset PYTHONPATH; fi; }
for round in 1 2; do
  for v in main speed4; do
    use $v
    echo "== round $round: $v $($py -c 'import throttlelab; print(throttlelab.__file__)')"
    $tl bench --json --runs 5 bench-busy-8cpu bench-busy-64cpu bench-busy-256cpu > $out/bench-$v-$round.json
    $py -c "
import json
for r in json.load(open('$out/bench-$v-$round.json')):
    print(r['scenario'], r['sim_s'], round(r['wall_s'],4), r['events'], round(r['events_per_s']), round(r['sim_s_per_wall_s'],2), r.get('peak_rss_mb'))
"
    s=$(date +%s.%N); $tl advise request-service --max-throttled 5% --json > $out/advise-$v-$round.json; e=$(date +%s.%N)
    echo "advise request-service wall_s $(echo "$e - $s" | bc)"
    s=$(date +%s.%N); $tl run /tmp/speed4-cap/capture64.toml --json > $out/capture64-$v-$round.json; e=$(date +%s.%N)
    echo "run capture64 wall_s $(echo "$e - $s" | bc) $($py -c "import json; d=json.load(open('$out/capture64-$v-$round.json')); print('events', d['engine']['events'], 'engine wall_s', d['engine']['wall_s'])")"
  done
done
unset PYTHONPATH
echo "== parallel seeds (speed4)"
cd /work/wt/speed4 && $py scripts/parallel_seeds.py 3
