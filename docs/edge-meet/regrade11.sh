#!/bin/bash
# This stop's regrades (simulator only, no root), into docs/: every edge and releases grid
# against this engine, with the wake-up cost the probe measured (cycle11's hold: host 16 us,
# the 6.12 TCG guest 30 us; fresh rows carry their own) and, on the host's quiet sample, the
# old probe's late ticks left out (probe11). 6.1 was not timed: no cost assumed.
#   bash docs/edge-meet/regrade11.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
g() { echo "$*"; nice python scripts/fidelity_grid.py "$@" --seeds 20 > /dev/null; }
g --grid edge --regrade docs/fidelity-edge.json --wakeup-cost-us 16 --out docs/fidelity-edge.md
g --grid edge --regrade docs/fidelity-edge-second.json --forget-tick-late --wakeup-cost-us 16 --out docs/fidelity-edge-second.md
g --grid edge --kernel 6.12 --regrade docs/fidelity-edge-6.12-second.json --wakeup-cost-us 30 --out docs/fidelity-edge-6.12-second.md
g --grid edge --kernel 6.12 --regrade docs/fidelity-edge-6.12.json --wakeup-cost-us 30 --out docs/fidelity-edge-6.12.md
g --grid releases --regrade docs/fidelity-releases-6.12.json --wakeup-cost-us 30 --out docs/fidelity-releases-6.12.md
g --grid releases --regrade docs/fidelity-releases-6.18.json --wakeup-cost-us 16 --out docs/fidelity-releases-6.18.md
g --grid releases --regrade docs/fidelity-releases-6.18-repeat.json --wakeup-cost-us 16 --out docs/fidelity-releases-6.18-repeat.md
g --grid releases --regrade docs/fidelity-releases-6.1.json --out docs/fidelity-releases-6.1.md
for f in edge edge-second edge-6.12-second edge-6.12 releases-6.12 releases-6.18 releases-6.18-repeat releases-6.1; do
  echo "== $f"; python docs/edge-meet/grid_counts.py docs/fidelity-$f.json | head -8
done
