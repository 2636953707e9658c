#!/bin/bash
# The lead's hold for cycle11 (issue #34): the probe's run/sleep fit on the host
# and in the 6.12 guest (3 probes each), and cycle10's cycle_cost shapes with
# each run's fit beside what the run measured.
#
#   tl-measure bash docs/edge-meet/cycle11/hold.sh        (root; from the worktree, its venv active)
#
# Writes $OUT/{host,6.12}.{json,txt} (default docs/edge-meet/cycle11/): 2 x (3 + 18)
# kernel runs of 0.2-2 s, each after its probe (cycle10's 18 + 18 took 5 minutes).
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-docs/edge-meet/cycle11}
for k in host 6.12; do
    python docs/edge-meet/cycle11/check_fit.py "$k" "$OUT/$k.json" | tee "$OUT/$k.txt"
done
