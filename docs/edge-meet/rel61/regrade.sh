#!/bin/bash
# rel61's regrades (simulator only, no root): the 6.1 grids (releases, edge) and the
# grids of ddq12/regrade12.sh with its settings, each from the stored kernel runs in docs/
# into OUT (nothing in docs/ is written), one at a time. Run once on main's engine and once
# on this branch's (re-install the venv between), then compare:
#   bash docs/edge-meet/rel61/regrade.sh /tmp/rel61/main     # main's engine installed
#   bash docs/edge-meet/rel61/regrade.sh /tmp/rel61/new      # this branch's
#   for f in /tmp/rel61/new/*.json; do python docs/edge-meet/grid_counts.py "$f" "/tmp/rel61/main/$(basename "$f")"; done
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:?usage: regrade.sh OUT}
mkdir -p "$out"
python -c "import throttlelab, sys; sys.exit(not throttlelab.__file__.startswith('$PWD/'))" || {
  echo "throttlelab is not imported from $PWD: activate this worktree's venv" >&2; exit 1; }
g() {  # NAME FLAGS...: docs/fidelity-NAME.json regraded into OUT/NAME.{json,md}
  local name=$1; shift
  cp "docs/fidelity-$name.json" "$out/$name.json"
  echo "$(date -u +%T) $name $*"
  nice python scripts/fidelity_grid.py --regrade "$out/$name.json" "$@" --seeds 20 --out "$out/$name.md" > /dev/null
}
g releases-6.1 --grid releases --kernel 6.1
g edge-6.1 --grid edge --kernel 6.1
g releases-6.12 --grid releases --wakeup-cost-us 30
g releases-6.12-second --grid releases --wakeup-cost-us 30
g releases-6.18 --grid releases --wakeup-cost-us 16
g releases-6.18-repeat --grid releases --wakeup-cost-us 16
g edge --grid edge --wakeup-cost-us 16
g edge-second --grid edge --forget-tick-late --wakeup-cost-us 16
g edge-6.12-second --grid edge --kernel 6.12 --wakeup-cost-us 30
g edge-6.12 --grid edge --kernel 6.12 --wakeup-cost-us 30
