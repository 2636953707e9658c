#!/bin/sh
# rel61 (docs/fidelity.md, "6.1's releases grid, traced (rel61)"): the lead's quiet-host hold.
# 1. 6.1's releases grid measured again with today's harness (the controller at SCHED_FIFO,
#    edc2248, so the first periods fall inside cpu.stat's window; the probe's work speed, late
#    ticks and wake-up cost per run), as 6.12's second sample was: about 22 minutes.
# 2. The two run6-sleep4 rows at 10 ms traced in the guest (wake-ups, pulls, throttles), 3 runs
#    each, into /tmp/rel61-hold: about 2 minutes.
# From the worktree, its venv active:   tl-measure sh docs/edge-meet/rel61/hold.sh
# Then, without root:
#   python scripts/fidelity_grid.py --grid releases --kernel 6.1 --regrade docs/fidelity-releases-6.1-second.json --seeds 20 --out docs/fidelity-releases-6.1-second.md
#   python docs/edge-meet/grid_counts.py docs/fidelity-releases-6.1-second.json docs/fidelity-releases-6.1.json
#   (cd docs/edge-meet && python placement.py /tmp/rel61-hold/r2/trace-1.txt)   # after gunzip
#   python docs/edge-meet/rel61/migrations.py docs/edge-meet/rel61/r4.toml /tmp/rel61-hold/r4 3
set -e
python scripts/fidelity_grid.py --grid releases --runs 5 --duration-s 2 --kernel 6.1 --kernel-only --resume --max-minutes 22 --out docs/fidelity-releases-6.1-second.md
for row in r2 r4; do
  python docs/edge-meet/rel61/guest_trace.py trace docs/edge-meet/rel61/$row.toml /tmp/rel61-hold/$row 3 > /tmp/rel61-hold-$row.txt 2>&1
done
