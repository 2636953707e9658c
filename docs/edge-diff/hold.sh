#!/bin/sh
# The one tl-measure hold of docs/fidelity.md's "The worst row, traced" (6.12 guest, TCG):
#   tl-measure sh docs/edge-diff/hold.sh   (from the worktree, the venv active)
set -e
d=docs/edge-diff
throttlelab diff $d/spin2-30-60.toml --kernel 6.12 --accel tcg --runs 3 -o /tmp/edgediff-spin > /tmp/edgediff-spin.txt 2>&1
throttlelab diff $d/knife-edge-70-100.toml --kernel 6.12 --accel tcg --runs 3 -o /tmp/edgediff-knife > /tmp/edgediff-knife.txt 2>&1
