#!/bin/sh
# bgp50's hold (docs/fidelity.md, "The probe's median, carried"):
#   tl-measure sh docs/edge-diff/bgp50/hold.sh   (from the worktree, the venv active)
# compare, like host, now with the probe's median preemption length (host.background_p50_us).
set -e
o=docs/edge-diff/bgp50
date -u
throttlelab compare docs/edge-diff/spin20/spin2-20-40.toml --runs 5 --json > $o/compare-20.json
date -u
throttlelab compare docs/edge-diff/spin2-30-60.toml --runs 5 --json > $o/compare-30.json
date -u
