#!/bin/bash
# ../trace.sh with the CPU the worker is charged: sched_stat_runtime (each
# update_curr charge), the switches, wake-ups and migrations, and every
# interrupt's entry and exit (this host has no IRQ_TIME_ACCOUNTING:
# interrupt time is charged to the task it interrupts).
# Usage: trace.sh SCENARIO.toml OUT_PREFIX [--set ...]; writes
# OUT_PREFIX.trace (raw, not kept in git) and OUT_PREFIX.json (the run).
export BUFFER_KB=32768 EVENTS="sched/sched_switch sched/sched_waking sched/sched_wakeup sched/sched_wakeup_new
  sched/sched_migrate_task sched/sched_stat_runtime
  irq_vectors/local_timer_entry irq_vectors/local_timer_exit irq_vectors/reschedule_entry irq_vectors/reschedule_exit
  irq_vectors/call_function_entry irq_vectors/call_function_exit
  irq_vectors/call_function_single_entry irq_vectors/call_function_single_exit
  irq/irq_handler_entry irq/irq_handler_exit irq/softirq_entry irq/softirq_exit"
exec "$(cd "$(dirname "$0")" && pwd)/../trace.sh" "$@"
