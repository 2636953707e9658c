#!/bin/bash
# Trace 4 run/sleep threads (10 ms / 18.6 ms) on 2 CPUs with the host
# kernel's tracepoints (no kprobes here): switches, wake-ups with their
# target CPU, migrations and the hrtimers of the sleeps and ticks.
# Usage: trace.sh SCENARIO.toml OUT_PREFIX [--set ...]; writes
# OUT_PREFIX.trace (raw, not kept in git) and OUT_PREFIX.json (the run).
set -e
here=$(cd "$(dirname "$0")" && pwd)
scen=$1; out=$2; shift 2
source "${VENV:-/work/venvs/diff}/bin/activate"
export THROTTLELAB_START_DELAY_MS=500
inst=/sys/kernel/tracing/instances/meet4-$$
mkdir "$inst"
trap 'echo 0 > $inst/tracing_on; rmdir $inst' EXIT
echo "${BUFFER_KB:-16384}" > "$inst/buffer_size_kb"
# $EVENTS: another set of events (varwork7/trace.sh's).
for e in ${EVENTS:-sched/sched_switch sched/sched_waking sched/sched_wakeup sched/sched_wakeup_new \
         sched/sched_migrate_task timer/hrtimer_start timer/hrtimer_expire_entry}; do
  echo 1 > "$inst/events/$e/enable"
done
echo 1 > "$inst/tracing_on"
throttlelab real "$scen" --json "$@" > "$out.json"
echo 0 > "$inst/tracing_on"
cat "$inst/trace" > "$out.trace"
grep -c . "$out.trace" || true
