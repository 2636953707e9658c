#!/bin/sh
# bgshape7's second hold (docs/fidelity.md, "The background's shape, traced through the probe and the runs"):
#   tl-measure sh docs/edge-diff/bgshape7/hold2.sh BURST   (from the worktree, the venv active; BURST 0 or 1)
# A fresh host sample of the edge grid's spinner rows at 20, 25, 30 and 40 ms with 2-4
# threads, with the probe's median from schedstat (probe.rs), while a tracefs instance of
# its own records sched_switch and sched_migrate_task as hold.sh's did: the probe's
# median against the switches' in the same windows.
set -e
o=docs/edge-diff/bgshape7
b=$1
i=/sys/kernel/tracing/instances/bgshape7-$$
mkdir $i
trap 'echo 0 > $i/tracing_on; rmdir $i' EXIT
echo 32768 > $i/buffer_size_kb
echo 1 > $i/events/sched/sched_switch/enable
echo 1 > $i/events/sched/sched_migrate_task/enable
echo 1 > $i/tracing_on
date -u
rows=""
for t in 2 3 4; do for p in 20 25 30 40; do rows="$rows spin,$t,$p,$b"; done; done
python docs/edge-meet/fresh_rows.py $o/fresh-burst$b.json $rows --max-minutes 6
date -u
echo 0 > $i/tracing_on
grep -h . $i/per_cpu/cpu*/stats | grep -i overrun
cat $i/trace | gzip > $o/trace-burst$b.txt.gz
date -u
