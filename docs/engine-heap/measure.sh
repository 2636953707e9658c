#!/bin/bash
# issue 36 / heap: base (615ec44, /work/venvs/heapbase) and branch (heap, /work/venvs/perf), alternating, same hold.
cd /tmp
for round in 1 2; do
  for v in heapbase perf; do
    echo "== round $round: $v"
    /work/venvs/$v/bin/throttlelab bench --json --runs 5 bench-busy-8cpu bench-busy-64cpu bench-busy-256cpu > /tmp/heap-cg/bench-$v-$round.json
    /work/venvs/$v/bin/python -c "
import json,sys
for r in json.load(open('/tmp/heap-cg/bench-$v-$round.json')):
    print(r['scenario'], r['sim_s'], round(r['wall_s'],4), r['events'], round(r['events_per_s']), round(r['sim_s_per_wall_s'],2), r.get('peak_rss_mb'))
"
  done
done
