#!/usr/bin/env bash
# stream2's hold 4: are the reader's long gaps its own writes to the spill? 60 s of stress-ng --switch 2 captured,
# alternating two builds, 2 each: tl-inline (9490d76: the reader writes the spill itself, the writes timed) and
# tl-writer (the writes queued to a thread of their own, 16 MiB at most, the reader's waits for it counted; built from
# the tree just before 4512aba, whose writer thread ran at SCHED_OTHER: 4512aba gives it the reader's policy). [capture] gives the
# longest gap between reads, the reader's longest work between sleeps, the spill's longest write and their sum.
#   tl-measure bash docs/capture-stream/hold4.sh [DIR]     (DIR holds the two binaries; default /tmp/stream2-hold)
DIR="${1:-/tmp/stream2-hold}"
HERE=/work/wt/stream2
cd /tmp
date -u
for round in 1 2; do
    for build in tl-inline tl-writer; do
        echo "$build: $(THROTTLELAB="$DIR/$build" unshare -m --propagation private bash "$HERE/scripts/capture_cost.sh" 60 1 capture | tr '\n' ' ')"
    done
done
date -u
