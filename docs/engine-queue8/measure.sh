#!/bin/bash
# issue 36 / queue8: main (a159ec5: its python/throttlelab from `git archive a159ec5` and
# the _native.abi3.so main's build made at 17:44, copied to /tmp/queue8-base/site before
# any change) against the branch (queue8, /work/venvs/queue8), 3 rounds, each with
# `reproduce --all` compared with tests/golden/reproduce-all.json:
#   tl-measure bash docs/engine-queue8/measure.sh
golden=$(cd "$(dirname "$0")/../.." && pwd)/tests/golden/reproduce-all.json
export EXTRA='s=$(date +%s.%N); $tl reproduce --all --json > $out/reproduce-$v-$round.json; e=$(date +%s.%N)
echo "reproduce --all wall_s $(echo "$e - $s" | bc)"
cmp -s $out/reproduce-$v-$round.json '"$golden"' && echo "reproduce --all identical to the golden" || echo "reproduce --all DIFFERS from the golden"'
exec "$(dirname "$0")/../../scripts/bench_ab.sh" queue8 /tmp/queue8-base/site /work/venvs/queue8 3
