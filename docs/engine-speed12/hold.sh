#!/bin/bash
# issue 36, this stop's hold (run as `tl-measure bash docs/engine-speed12/hold.sh`): the busy
# built-ins, main before speed12 (e41f8fa's engine: /tmp/final11-site) against main with it
# (/tmp/m12-site), both `pip install --target` sites of `git archive` trees (the same kind of
# install), alternately, 3 rounds of `bench --json --runs 5`; then docs/engine-issue36/measure.sh
# with /tmp/m12-site (AFTER= another site; advise and reproduce --all against the code the issue was filed on).
set -u
# BEFORE, AFTER and OUT (env) reuse this hold for a later stop (speed13's hold.sh does).
here=$(cd "$(dirname "$0")" && pwd)
before=${BEFORE:-/tmp/final11-site} after=${AFTER:-/tmp/m12-site}
out=${OUT:-/tmp/speed12-hold}; mkdir -p $out; cd /tmp
py=/work/venvs/main/bin/python
for round in 1 2 3; do
  for v in before after; do
    site=$before; [ $v = after ] && site=$after
    PYTHONPATH=$site $py -m throttlelab bench --json --runs 5 bench-busy-8cpu bench-busy-64cpu bench-busy-256cpu > $out/bench-$v-$round.json
    echo "== round $round $v: $(PYTHONPATH=$site $py -c "
import json; d=json.load(open('$out/bench-$v-$round.json'))
rows=d if isinstance(d,list) else d.get('results',d)
print(' '.join(f\"{r['scenario']}: {r['events']} events {r['events_per_s']/1e6:.2f} M/s {r['sim_s_per_wall_s']:.1f}x\" for r in rows))")"
  done
done
# measure.sh takes BEFORE and OUT too (rich15): its "before" here is the code the issue was filed on.
env -u BEFORE -u OUT bash "$here/../engine-issue36/measure.sh" /work/venvs/main $after
