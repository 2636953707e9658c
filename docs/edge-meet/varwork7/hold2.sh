#!/bin/bash
# varwork7's second hold: (1) the probe's spread beside the traced one, in
# the same runs: 1 thread and 4 threads unlimited, 2 runs each, traced by
# trace.sh (each run's JSON carries its probe's work_speed_cv); (2) a fresh
# kernel sample, 5 runs each, of the seven 4-thread rows that differed on
# the fresh grid and the 1-thread 50 ms 0.9 row (fresh_rows.py).
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/varwork7/hold2}
mkdir -p "$OUT"
for r in 1 2; do "$here/trace.sh" "$here/../rs1.toml" "$OUT/rs1-$r" --set seed=$r; done
for r in 1 2; do "$here/trace.sh" "$here/../rs4.toml" "$OUT/rs4-$r" --set seed=$r; done
source "${VENV:-/work/venvs/diff}/bin/activate"
cd "$here/../../.." && python docs/edge-meet/fresh_rows.py "$here/fresh7.json" \
  1,50,0.9,0 4,100,1.0,0 4,20,1.05,1 4,50,1.05,1 4,100,1.1,0 4,20,1.25,1 4,50,1.25,1 4,100,1.25,0 --max-minutes 5.5
