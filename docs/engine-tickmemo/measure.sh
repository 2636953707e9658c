#!/bin/bash
# issue 36 / speed3: main (65fac08, its wheel unpacked in /tmp/speed3-base/site) and the
# branch (speed3, /work/venvs/perf), alternating, in one tl-measure hold.
cd /tmp
out=/tmp/speed3-cg
for round in 1 2; do
  for v in main speed3; do
    echo "== round $round: $v"
    if [ $v = main ]; then export PYTHONPATH=/tmp/speed3-base/site; else unset PYTHONPATH; fi
    /work/venvs/perf/bin/python -c "import throttlelab; print(throttlelab.__file__)"
    /work/venvs/perf/bin/throttlelab bench --json --runs 5 bench-busy-8cpu bench-busy-64cpu bench-busy-256cpu > $out/bench-$v-$round.json
    /work/venvs/perf/bin/python -c "
import json
for r in json.load(open('$out/bench-$v-$round.json')):
    print(r['scenario'], r['sim_s'], round(r['wall_s'],4), r['events'], round(r['events_per_s']), round(r['sim_s_per_wall_s'],2), r.get('peak_rss_mb'))
"
  done
done
