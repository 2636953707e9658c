#!/bin/bash
# Trace a run of the real backend's worker with the CPU it is charged:
# sched_stat_runtime (each update_curr charge), the switches, wake-ups and
# migrations, and every interrupt's entry and exit (this host has no
# IRQ_TIME_ACCOUNTING: interrupt time is charged to the task it interrupts).
# Usage: trace.sh SCENARIO.toml OUT_PREFIX [--set ...]; writes
# OUT_PREFIX.trace (raw, not kept in git) and OUT_PREFIX.json (the run).
set -e
scen=$1; out=$2; shift 2
source "${VENV:-/work/venvs/diff}/bin/activate"
export THROTTLELAB_START_DELAY_MS=500
inst=/sys/kernel/tracing/instances/varwork7-$$
mkdir "$inst"
trap 'echo 0 > $inst/tracing_on; rmdir $inst' EXIT
echo 32768 > "$inst/buffer_size_kb"
for e in sched/sched_switch sched/sched_waking sched/sched_wakeup sched/sched_wakeup_new \
         sched/sched_migrate_task sched/sched_stat_runtime \
         irq_vectors/local_timer_entry irq_vectors/local_timer_exit \
         irq_vectors/reschedule_entry irq_vectors/reschedule_exit \
         irq_vectors/call_function_entry irq_vectors/call_function_exit \
         irq_vectors/call_function_single_entry irq_vectors/call_function_single_exit \
         irq/irq_handler_entry irq/irq_handler_exit irq/softirq_entry irq/softirq_exit; do
  echo 1 > "$inst/events/$e/enable"
done
echo 1 > "$inst/tracing_on"
throttlelab real "$scen" --json "$@" > "$out.json"
echo 0 > "$inst/tracing_on"
cat "$inst/trace" > "$out.trace"
grep -c . "$out.trace" || true
