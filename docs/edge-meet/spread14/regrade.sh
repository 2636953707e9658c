#!/bin/bash
# spread14's regrades (simulator only, no root), into docs/: ddq12's grids (regrade12.sh), then
# the host's third sample, 6.12's fresh releases sample and 6.1's grids, each against its stored
# version at BASE (default HEAD).   bash docs/edge-meet/spread14/regrade.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
bash docs/edge-meet/ddq12/regrade12.sh
g() { echo "$(date -u +%T) $*"; nice python scripts/fidelity_grid.py "$@" --seeds 20 > /dev/null; }
for f in edge-third releases-6.12-second edge-6.1 releases-6.1; do
  git show "${BASE:-HEAD}:docs/fidelity-$f.json" > "/tmp/spread14-old-$f.json"
done
g --grid edge --regrade /tmp/spread14-old-edge-third.json --out docs/fidelity-edge-third.md
g --grid releases --kernel 6.12 --regrade /tmp/spread14-old-releases-6.12-second.json --out docs/fidelity-releases-6.12-second.md
g --grid edge --kernel 6.1 --regrade /tmp/spread14-old-edge-6.1.json --out docs/fidelity-edge-6.1.md
g --grid releases --kernel 6.1 --regrade /tmp/spread14-old-releases-6.1.json --out docs/fidelity-releases-6.1.md
for f in edge-third releases-6.12-second edge-6.1 releases-6.1; do
  echo "== $f"
  python docs/edge-meet/grid_counts.py "docs/fidelity-$f.json" "/tmp/spread14-old-$f.json"
done
