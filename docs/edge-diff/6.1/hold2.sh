#!/bin/sh
# The second tl-measure hold of docs/fidelity.md's "6.1 under TCG" (issue #34): the rows
# of hold.sh, and 100 ms / 100 ms, with the controller at SCHED_FIFO (edc2248), on 6.1 as
# Debian boots it, and the first row on 6.12. From the worktree, the venv active:
#   tl-measure sh docs/edge-diff/6.1/hold2.sh
d=docs/edge-diff/6.1
o=${OUT:-/tmp/edge61-fifo}
mkdir -p $o
for row in spin2-100-150 spin2-100-150-75 spin2-100-100; do
    timeout 120 throttlelab diff $d/$row.toml --kernel 6.1 --accel tcg --runs 3 -o $o/$row > $o/$row.txt 2>&1
done
timeout 120 throttlelab diff $d/spin2-100-150.toml --set kernel.profile=6.12 --kernel 6.12 --accel tcg --runs 3 -o $o/spin2-100-150-6.12 > $o/spin2-100-150-6.12.txt 2>&1
