#!/bin/sh
# edge6's second hold (docs/fidelity.md, "Two spinners at 20 ms, charge by charge"):
#   tl-measure sh docs/edge-diff/spin20/hold.sh   (from the worktree, the venv active)
# diff's host trace now has sched_stat_runtime: every charge update_curr makes.
set -e
d=docs/edge-diff/spin20
date -u
throttlelab diff $d/spin2-20-40.toml --runs 6 -o /tmp/edge6-spin20 > /tmp/edge6-spin20.txt 2>&1
date -u
throttlelab diff docs/edge-diff/spin2-30-60.toml --runs 4 -o /tmp/edge6-spin30 > /tmp/edge6-spin30.txt 2>&1
date -u
# Copied afterwards: /tmp/edge6-spin20 to out20/ and /tmp/edge6-spin30 to out30/ (diff.json, the output as output.txt, traces gzipped).
