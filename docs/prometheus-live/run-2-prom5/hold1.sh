#!/bin/bash
# Hold 1 (prom5, #35): pgbench captured at 406m and 300m beside the other four, and alone (hold1.py).
#   tl-measure bash docs/prometheus-live/run-2-prom5/hold1.sh    (from the repo, its venv active)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
cd /tmp
date -u +"start %T"; uptime
timeout 420 python "$HERE/hold1.py"
echo "hold1 rc=$?"; date -u +"end %T"
