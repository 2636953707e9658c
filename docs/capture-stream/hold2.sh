#!/usr/bin/env bash
# stream's hold 2: 60 s of stress-ng --switch 2, alone and captured (phases streamed to the spill, reader at SCHED_FIFO,
# 31cbe29's set-up), alternating, 3 each.
cd /tmp
export THROTTLELAB=/tmp/stream-hold/throttlelab-real
date -u
unshare -m --propagation private bash /work/wt/stream/scripts/capture_cost.sh 60 3 "alone capture"
date -u
