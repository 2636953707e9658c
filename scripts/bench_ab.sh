#!/bin/bash
# An engine change's wall clock against main's, alternating, for one tl-measure hold:
#   scripts/bench_ab.sh NAME BASE_SITE VENV ROUNDS
# BASE_SITE: main's installed package, copied aside before the change (used through
# PYTHONPATH); VENV: the branch's. Each round and build runs the busy built-ins
# (bench --json --runs 5) and advise request-service; $EXTRA, if set, is evaluated after
# them with $v (main or NAME), $round, $out, $py and $tl set. Output in /tmp/NAME-hold.
set -u
name=$1 base=$2 venv=$3 rounds=$4
cd /tmp
out=/tmp/$name-hold
mkdir -p $out
py=$venv/bin/python
tl=$venv/bin/throttlelab
use() { if [ $1 = main ]; then export PYTHONPATH=$base; else unset PYTHONPATH; fi; }
for round in $(seq 1 $rounds); do
  for v in main $name; do
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
    eval "${EXTRA:-}"
  done
done
unset PYTHONPATH
cmp $out/advise-main-1.json $out/advise-$name-1.json && echo "advise outputs identical"
