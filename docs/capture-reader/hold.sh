#!/usr/bin/env bash
# fifo's one hold: 60 s of stress-ng --switch 2, alone and captured (reader at SCHED_FIFO), alternating, 3 each;
# then one 20 s capture with the reader at nice -10 (CAP_SYS_NICE dropped), as before.
cd /tmp
export THROTTLELAB=/tmp/fifo-throttlelab-real
date -u
unshare -m --propagation private bash /work/wt/fifo/scripts/capture_cost.sh 60 3 "alone capture"
date -u
unshare -m --propagation private bash /work/wt/fifo/scripts/capture_cost.sh 20 1 "capture-nice"
date -u
