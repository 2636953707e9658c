#!/bin/sh
# Run a command while a tracefs instance of its own records sched_switch and
# sched_migrate_task on every CPU, then write the trace, gzipped, to OUT.
# Nothing reads the buffer until the end (no tracer task on the CPUs), and the
# instance is removed on exit:  sh traced.sh OUT.txt.gz CMD...
set -e
out=$1
shift
i=/sys/kernel/tracing/instances/bgshape7-$$
mkdir $i
trap 'echo 0 > $i/tracing_on; rmdir $i' EXIT
echo 32768 > $i/buffer_size_kb
echo 1 > $i/events/sched/sched_switch/enable
echo 1 > $i/events/sched/sched_migrate_task/enable
echo 1 > $i/tracing_on
"$@"
echo 0 > $i/tracing_on
grep -h . $i/per_cpu/cpu*/stats | grep -i overrun
cat $i/trace | gzip > $out
