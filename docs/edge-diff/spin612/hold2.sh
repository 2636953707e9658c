#!/bin/sh
# Hold 2 (6.12 guest, TCG), from the worktree with the venv active:
#   tl-measure sh docs/edge-diff/spin612/hold2.sh
# The extension is built first (the session's other holds kept stopping the
# build between them), then a minute's rest, then the runs: the probe before
# each run looks for late ticks (host.tick_late) and the run's trace times them.
set -e
d=docs/edge-diff/spin612
pip install -q -c constraints.txt --no-build-isolation -e '.[test]' > /tmp/spin612-pip.log 2>&1
sleep 60
throttlelab diff docs/edge-diff/spin2-30-60.toml --kernel 6.12 --accel tcg --runs 3 -o /tmp/spin612-2-30 > /tmp/spin612-2-30.txt 2>&1
throttlelab diff $d/spin2-40-80.toml --kernel 6.12 --accel tcg --runs 3 -o /tmp/spin612-2-40 > /tmp/spin612-2-40.txt 2>&1
