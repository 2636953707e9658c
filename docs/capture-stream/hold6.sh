#!/usr/bin/env bash
# stream3's hold 1 (#40): the writer at SCHED_FIFO measured. 60 s of stress-ng --switch 2, alone and captured by
# `throttlelab capture` (the venv's build of branch stream3 at b15119b: 04fa5e8's writer at the reader's
# SCHED_FIFO, [capture] writer_policy), alternating, 3 each; capture_cost.sh as hold 5 ran it, now saying when a
# capture fails, how long stress-ng ran and how many of its processes were stopped 5 s in.
#   tl-measure bash docs/capture-stream/hold6.sh
HERE="$(cd "$(dirname "$0")/../.." && pwd)"
cd /tmp
export THROTTLELAB=/work/venvs/capture/bin/throttlelab
date -u; cat /proc/loadavg
unshare -m --propagation private bash "$HERE/scripts/capture_cost.sh" 60 3 "alone capture"
date -u; cat /proc/loadavg
