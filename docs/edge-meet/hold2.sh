#!/bin/bash
# One tl-measure hold: trace.sh on 4 threads unlimited (3 seeds), 1 and 2
# threads unlimited, and the knife-edge case (2 threads under 70/100 ms, 3 runs).
# Raw traces go to $OUT (not kept in git); analyse_trace.py summarises them.
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/meet4/hold}
mkdir -p "$OUT"
for r in 1 2 3; do ./trace.sh rs4.toml "$OUT/rs4-$r" --set seed=$r; done
./trace.sh rs1.toml "$OUT/rs1-1" --set seed=1
./trace.sh rs2.toml "$OUT/rs2-1" --set seed=1
for r in 1 2 3; do ./trace.sh knife.toml "$OUT/knife-$r" --set seed=$r; done
