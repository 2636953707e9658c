#!/bin/bash
# issue 36 / speed5: main (929623a, its installed package copied to /tmp/speed5-base/site
# before any change) and the branch (speed5, /work/venvs/perf), alternating, in one
# tl-measure hold: the busy built-ins (bench --json --runs 5), and advise request-service.
cd /tmp
out=/tmp/speed5-hold
mkdir -p $out
py=/work/venvs/perf/bin/python
tl=/work/venvs/perf/bin/throttlelab
use() { if [ $1 = main ]; then export PYTHONPATH=/tmp/speed5-base/site; else unset PYTHONPATH; fi; }
for round in 1 2 3; do
  for v in main speed5; do
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
  done
done
unset PYTHONPATH
cmp $out/advise-main-1.json $out/advise-speed5-1.json && echo "advise outputs identical"
