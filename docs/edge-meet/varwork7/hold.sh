#!/bin/bash
# varwork7's first hold: the worker's run phases' CPU time, run by run.
# 1 thread alone (3 runs) and 4 threads unlimited (3 runs), 10 ms run /
# 18.6 ms sleep on 2 CPUs, 3 s each, traced by trace.sh. Raw traces go to
# $OUT (not kept in git); run_cpu.py summarises them.
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/varwork7/hold}
mkdir -p "$OUT"
for r in 1 2 3; do "$here/trace.sh" "$here/../rs1.toml" "$OUT/rs1-$r" --set seed=$r; done
for r in 1 2 3; do "$here/trace.sh" "$here/../rs4.toml" "$OUT/rs4-$r" --set seed=$r; done
