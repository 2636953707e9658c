#!/usr/bin/env bash
# stream's hold 1: what each event type costs stress-ng --switch 2 (20 s runs, 2 rounds, alternating with alone).
cd /tmp
date -u
unshare -m --propagation private bash /work/wt/stream/scripts/capture_cost.sh 20 2 "alone only-sched_switch only-sched_waking only-sched_stat_runtime only-sched_process_fork only-sched_process_exit nocmd"
date -u
