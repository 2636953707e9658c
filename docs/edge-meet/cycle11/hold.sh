#!/bin/bash
# The lead's hold for cycle11 (issue #34): the probe's run/sleep fit on the host
# and in the 6.12 guest (3 probes each), and cycle10's cycle_cost shapes with
# each run's fit beside what the run measured.
#
#   tl-measure bash docs/edge-meet/cycle11/hold.sh        (root; from the worktree, its venv active)
#
# Writes $OUT/{host,6.12}.{json,txt} (default docs/edge-meet/cycle11/), about
# 2 x (18 + 3) kernel runs: some 3 minutes on the host, 20-25 in the guest.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-docs/edge-meet/cycle11}
for k in host 6.12; do
    python docs/edge-meet/cycle11/check_fit.py "$k" "$OUT/$k.json" | tee "$OUT/$k.txt"
done
