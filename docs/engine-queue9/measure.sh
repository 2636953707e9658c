#!/bin/bash
# issue 36 / queue9: main (8c6b490: its python/throttlelab from `git archive 8c6b490` and the
# _native.abi3.so built at 20:38 before any change, the same bytes as /work/main's, copied to
# /tmp/queue9-base/site) against the branch (19d3bad, /work/venvs/queue9), alternating,
# 3 rounds, each with `reproduce --all` compared with tests/golden/reproduce-all.json:
#   tl-measure bash docs/engine-queue9/measure.sh
golden=$(cd "$(dirname "$0")/../.." && pwd)/tests/golden/reproduce-all.json
export EXTRA='s=$(date +%s.%N); $tl reproduce --all --json > $out/reproduce-$v-$round.json; e=$(date +%s.%N)
echo "reproduce --all wall_s $(echo "$e - $s" | bc)"
cmp -s $out/reproduce-$v-$round.json '"$golden"' && echo "reproduce --all identical to the golden" || echo "reproduce --all DIFFERS from the golden"'
exec "$(dirname "$0")/../../scripts/bench_ab.sh" queue9 /tmp/queue9-base/site /work/venvs/queue9 3
