#!/bin/bash
# over14: the grids regrade12.sh covers, plus the host's third edge sample, regraded by
# the engine the venv imports (PYTHONPATH may point at another build), into
# /tmp/over14-TAG-*.{json,md}; then grid_counts.py of each against main's regrade
# (TAG main, made first):   bash docs/edge-meet/over14/regrade_all.sh TAG
set -euo pipefail
cd "$(dirname "$0")/../../.."
tag=${1:?TAG}
g() { echo "$(date -u +%T) $*"; nice python scripts/fidelity_grid.py "$@" --seeds 20 > /dev/null; }
r() {  # r NAME ARGS...: regrade docs/fidelity-NAME.json's stored runs into /tmp
  local f=$1; shift
  cp "docs/fidelity-$f.json" "/tmp/over14-$tag-$f.json"
  g "$@" --regrade "/tmp/over14-$tag-$f.json" --out "/tmp/over14-$tag-$f.md"
}
r releases-6.12 --grid releases --wakeup-cost-us 30
r releases-6.18 --grid releases --wakeup-cost-us 16
r releases-6.18-repeat --grid releases --wakeup-cost-us 16
r edge --grid edge --wakeup-cost-us 16
r edge-second --grid edge --forget-tick-late --wakeup-cost-us 16
r edge-third --grid edge --wakeup-cost-us 16
r edge-6.12-second --grid edge --kernel 6.12 --wakeup-cost-us 30
r edge-6.12 --grid edge --kernel 6.12 --wakeup-cost-us 30
for f in releases-6.12 releases-6.18 releases-6.18-repeat edge edge-second edge-third edge-6.12-second edge-6.12; do
  echo "== $f: main, then $tag"
  python docs/edge-meet/grid_counts.py "/tmp/over14-main-$f.json" "/tmp/over14-$tag-$f.json" | sed -n 1,3p
done
