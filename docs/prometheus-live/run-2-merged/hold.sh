#!/bin/bash
# The merge's hold (#35): run-2's samples with the node's other load (run-2-neighbours/samples.json),
# re-advised by the merged code (the EEVDF wake-up tie, 147f3efaa241, in the engine): all five
# workloads under advise's limits and KRR's, at once, 3 rounds of 60 s a side. DIR (default this
# directory) is the run's: its plan.json, and where the rounds go (run-2-prom5 is the next model's).
#   tl-measure bash docs/prometheus-live/run-2-merged/hold.sh [DIR]    (from the repo, its venv active)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(cd "${1:-$HERE}" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
cd /tmp
date -u +"start %T"; uptime
timeout 470 python "$REPO/scripts/prometheus_acceptance.py" apply -o "$OUT" --round 1,2,3 --run-s 60
echo "apply rc=$?"; date -u +"end %T"
