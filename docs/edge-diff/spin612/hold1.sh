#!/bin/sh
# Hold 1 (6.12 guest, TCG), from the worktree with the venv active:
#   tl-measure sh docs/edge-diff/spin612/hold1.sh
set -e
d=docs/edge-diff/spin612
throttlelab diff $d/spin1-25-25.toml --kernel 6.12 --accel tcg --runs 3 -o /tmp/spin612-1-25 > /tmp/spin612-1-25.txt 2>&1
throttlelab diff $d/spin3-30-60.toml --kernel 6.12 --accel tcg --runs 3 -o /tmp/spin612-3-30 > /tmp/spin612-3-30.txt 2>&1
