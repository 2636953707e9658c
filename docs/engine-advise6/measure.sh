#!/bin/bash
# issue 36 / advise6, one tl-measure hold: main (f0c256d, its installed package copied to
# /tmp/advise6-main-site before any change) against the branch (advise6, /work/venvs/docs),
# alternately, 3 rounds: `advise request-service --max-throttled 5% --json` (scripts/bench_ab.sh,
# with the busy built-ins) and `reproduce --all --json`, wall clock; every output compared;
# then breakdown.py on each build (one worker, in-process). Run from /tmp (tl-measure pauses
# processes whose working directory is under /work/wt).
set -u
here=$(cd "$(dirname "$0")" && pwd)
base=/tmp/advise6-main-site venv=/work/venvs/docs
"$here/../../scripts/advise_reproduce_ab.sh" advise6 $base $venv 3
for v in main advise6; do
  if [ $v = main ]; then export PYTHONPATH=$base; else unset PYTHONPATH; fi
  echo "== breakdown: $v"
  $venv/bin/python "$here/breakdown.py" advise
  $venv/bin/python "$here/breakdown.py" pool
  for i in 1 2 3; do s=$(date +%s.%N); $venv/bin/throttlelab --help > /dev/null; e=$(date +%s.%N); echo "throttlelab --help wall_s $(echo "$e - $s" | bc)"; done
done
unset PYTHONPATH
echo "== breakdown: reproduce --all, serially (the branch's package; the runs are main's)"
$venv/bin/python "$here/breakdown.py" reproduce
