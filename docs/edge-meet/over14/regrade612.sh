#!/bin/bash
# over14: 6.12's two edge grids regraded by this tree's simulator (regrade12.sh's two
# lines), into /tmp/over14-TAG-*.{json,md}, then each against its stored version:
#   bash docs/edge-meet/over14/regrade612.sh TAG
set -euo pipefail
cd "$(dirname "$0")/../../.."
tag=${1:?TAG}
python -c "import throttlelab, sys; sys.exit(not throttlelab.__file__.startswith('$PWD/'))" || {
  echo "throttlelab is not imported from $PWD: activate this worktree's venv" >&2; exit 1; }
g() { echo "$(date -u +%T) $*"; nice python scripts/fidelity_grid.py "$@" --seeds 20 > /dev/null; }
for f in edge-6.12-second edge-6.12; do
  cp "docs/fidelity-$f.json" "/tmp/over14-$tag-$f.json"
  g --grid edge --kernel 6.12 --regrade "/tmp/over14-$tag-$f.json" --wakeup-cost-us 30 --out "/tmp/over14-$tag-$f.md"
done
for f in edge-6.12-second edge-6.12; do
  echo "== $f"
  python docs/edge-meet/grid_counts.py "/tmp/over14-$tag-$f.json" "docs/fidelity-$f.json"
done
