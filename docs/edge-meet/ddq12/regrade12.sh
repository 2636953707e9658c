#!/bin/bash
# ddq12's regrades (simulator only, no root), into docs/: the grids PLACE_LAG and
# RUN_TO_PARITY can move (EEVDF profiles: the edge grids, releases 6.12 and 6.18),
# with regrade11.sh's settings, one at a time; then each against its stored version
# at HEAD (grid_counts.py NEW OLD).   bash docs/edge-meet/ddq12/regrade12.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
# The engine graded must be this tree's (the venv's editable install), not another install's.
python -c "import throttlelab, sys; sys.exit(not throttlelab.__file__.startswith('$PWD/'))" || {
  echo "throttlelab is not imported from $PWD: activate this worktree's venv" >&2; exit 1; }
g() { echo "$(date -u +%T) $*"; nice python scripts/fidelity_grid.py "$@" --seeds 20 > /dev/null; }
g --grid releases --regrade docs/fidelity-releases-6.12.json --wakeup-cost-us 30 --out docs/fidelity-releases-6.12.md
g --grid releases --regrade docs/fidelity-releases-6.18.json --wakeup-cost-us 16 --out docs/fidelity-releases-6.18.md
g --grid releases --regrade docs/fidelity-releases-6.18-repeat.json --wakeup-cost-us 16 --out docs/fidelity-releases-6.18-repeat.md
g --grid edge --regrade docs/fidelity-edge.json --wakeup-cost-us 16 --out docs/fidelity-edge.md
g --grid edge --regrade docs/fidelity-edge-second.json --forget-tick-late --wakeup-cost-us 16 --out docs/fidelity-edge-second.md
g --grid edge --kernel 6.12 --regrade docs/fidelity-edge-6.12-second.json --wakeup-cost-us 30 --out docs/fidelity-edge-6.12-second.md
g --grid edge --kernel 6.12 --regrade docs/fidelity-edge-6.12.json --wakeup-cost-us 30 --out docs/fidelity-edge-6.12.md
for f in releases-6.12 releases-6.18 releases-6.18-repeat edge edge-second edge-6.12-second edge-6.12; do
  echo "== $f"
  git show "${BASE:-HEAD}:docs/fidelity-$f.json" > "/tmp/regrade12-old-$f.json"
  python docs/edge-meet/grid_counts.py "docs/fidelity-$f.json" "/tmp/regrade12-old-$f.json"
done
