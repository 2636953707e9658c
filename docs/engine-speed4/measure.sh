#!/bin/bash
# issue 36 / speed4: main (0724efc, its installed package copied to /tmp/speed4-base/site
# before any change) against the branch (speed4, /work/venvs/perf), 2 rounds, each also
# replaying a 60 s synthetic capture of 64 threads on 64 CPUs (synth_capture64.py); then
# the parallel-seeds comparison. (Written as one script when it ran; the same steps.)
EXTRA='s=$(date +%s.%N); $tl run /tmp/speed4-cap/capture64.toml --json > $out/capture64-$v-$round.json; e=$(date +%s.%N)
echo "run capture64 wall_s $(echo "$e - $s" | bc) $($py -c "import json; d=json.load(open(\"$out/capture64-$v-$round.json\")); print(\"events\", d[\"engine\"][\"events\"], \"engine wall_s\", d[\"engine\"][\"wall_s\"])")"' \
  "$(dirname "$0")/../../scripts/bench_ab.sh" speed4 /tmp/speed4-base/site /work/venvs/perf 2
echo "== parallel seeds (speed4)"
cd /work/wt/speed4 && /work/venvs/perf/bin/python scripts/parallel_seeds.py 3
