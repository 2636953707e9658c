#!/bin/sh
# bgshape7's first hold (docs/fidelity.md, "The background's shape, traced through the probe and the runs"):
#   tl-measure sh docs/edge-diff/bgshape7/hold.sh   (from the worktree, the venv active)
# A tracefs instance of its own records sched_switch and sched_migrate_task on
# every CPU while compare probes and runs 2 spinners at 20 ms / 40 ms (8 runs)
# and 30 ms / 60 ms (5 runs): the probe's 0.5 s before each run and the run's
# 2 s are both in the trace. Nothing reads the buffer until the end (no tracer
# task on the CPUs), and the instance is removed on exit.
set -e
o=docs/edge-diff/bgshape7
i=/sys/kernel/tracing/instances/bgshape7-$$
mkdir $i
trap 'echo 0 > $i/tracing_on; rmdir $i' EXIT
echo 32768 > $i/buffer_size_kb
echo 1 > $i/events/sched/sched_switch/enable
echo 1 > $i/events/sched/sched_migrate_task/enable
echo 1 > $i/tracing_on
date -u
echo "bgshape7 compare-20 start" > $i/trace_marker
throttlelab compare docs/edge-diff/spin20/spin2-20-40.toml --runs 8 --json > $o/compare-20.json
echo "bgshape7 compare-30 start" > $i/trace_marker
date -u
throttlelab compare docs/edge-diff/spin2-30-60.toml --runs 5 --json > $o/compare-30.json
echo "bgshape7 end" > $i/trace_marker
date -u
echo 0 > $i/tracing_on
grep -h . $i/per_cpu/cpu*/stats | grep -i overrun
cat $i/trace | gzip > $o/trace.txt.gz
date -u
