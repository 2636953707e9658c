#!/bin/bash
# issue 36, speed13's hold (run as `tl-measure bash docs/engine-speed13/hold.sh`): the busy
# built-ins, main with ddq12 (/tmp/m13-site) against speed13 (/tmp/s13-site, or AFTER=), both
# `pip install --target` sites of `git archive` trees (the same kind of install), alternately,
# 3 rounds of `bench --json --runs 5`; then docs/engine-issue36/measure.sh with AFTER's site
# (advise and reproduce --all against the code the issue was filed on). Every bench output is
# compared between the two sides (speed13 changes no output, so the events must be equal).
# The after site, if missing (a few minutes; before the hold; from the worktree):
#   rm -rf /tmp/s13-src && mkdir -p /tmp/s13-src && git archive speed13 | tar -x -C /tmp/s13-src
#   cd /tmp/s13-src && CARGO_TARGET_DIR=/tmp/s13-target /work/venvs/speed13/bin/pip install \
#     --no-deps --target /tmp/s13-site -c constraints.txt --no-build-isolation .
set -u
here=$(cd "$(dirname "$0")" && pwd)  # before the cd below
before=/tmp/m13-site after=${AFTER:-/tmp/s13-site}
for site in $before $after; do
  test -f $site/throttlelab/__init__.py || { echo "missing site: $site (see this script's head)"; exit 1; }
done
out=/tmp/speed13-hold; mkdir -p $out; cd /tmp
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
bash "$here/../engine-issue36/measure.sh" /work/venvs/main $after
