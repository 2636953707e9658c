#!/bin/bash
# cycle11's regrades (simulator only, no root): each stored grid before (the
# simulator as it is, no cost per wake-up) and after (--wakeup-cost-us: cycle10's
# single hold's measured cost, host 17 us, TCG guest 40 us; the stored rows'
# probes did not time run/sleep work). One at a time, nice'd.
#
#   bash docs/edge-meet/cycle11/regrade.sh [OUT_DIR]      (default /tmp/c11)
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/c11}
mkdir -p "$OUT"
# grid file, its --grid, the cost per wake-up of the kernel it measured
while read -r name grid cost; do
    for when in before after; do
        extra=()
        [ "$when" = after ] && extra=(--wakeup-cost-us "$cost")
        nice python scripts/fidelity_grid.py --grid "$grid" --regrade "docs/fidelity-$name.json" --seeds 20 \
            --out "$OUT/$name-$when.md" "${extra[@]}" > /dev/null
        echo "$name $when done $(date -u +%H:%M:%S)"
    done
done <<'GRIDS'
edge edge 17
edge-6.12-second edge 40
releases-6.12 releases 40
releases-6.18 releases 17
releases-6.18-repeat releases 17
releases-6.1 releases 40
GRIDS
