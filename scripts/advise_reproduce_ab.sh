#!/bin/bash
# advise request-service and reproduce --all, main against a branch, alternating, for one
# tl-measure hold (issue 36): scripts/advise_reproduce_ab.sh NAME BASE_SITE VENV ROUNDS
# (scripts/bench_ab.sh, with `reproduce --all --json` timed after each advise), then every
# output compared: advise against main's first, reproduce against tests/golden/reproduce-all.json.
set -u
name=$1 base=$2 venv=$3 rounds=$4
root=$(cd "$(dirname "$0")/.." && pwd)
out=/tmp/$name-hold
EXTRA='s=$(date +%s.%N); $tl reproduce --all --json > $out/reproduce-$v-$round.json 2>/dev/null; e=$(date +%s.%N); echo "reproduce --all wall_s $(echo "$e - $s" | bc)"' \
  "$root/scripts/bench_ab.sh" $name $base $venv $rounds
for f in $out/advise-*.json; do cmp -s $out/advise-main-1.json $f || echo "DIFFERS: $f"; done
for f in $out/reproduce-*.json; do cmp -s "$root/tests/golden/reproduce-all.json" $f || echo "DIFFERS: $f"; done
echo "outputs compared: $(ls $out/advise-*.json | wc -l) advise (against main's first), $(ls $out/reproduce-*.json | wc -l) reproduce --all (against tests/golden/reproduce-all.json)"
