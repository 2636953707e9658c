#!/usr/bin/env bash
# stream2's hold 3 (#40's Done-when): nginx (Debian's nginx-light, 2 workers) under wrk (2 threads, 32 connections)
# in a cgroup, captured for 10 minutes by `throttlelab-real capture` (phases spilled as recognised, reader at
# SCHED_FIFO), with nginx + wrk alone for 20 s before and after (throughput cost). The capture's RSS is sampled
# every 60 s (memory flat?); its [capture] block gives lost events and kernel trace memory. The replay
# (`throttlelab run OUT --json`) is run after the hold: it is deterministic.
#   tl-measure bash docs/capture-stream/hold3.sh [SECONDS] [OUTDIR]
SECS="${1:-600}"
OUTDIR="${2:-/tmp/stream2-hold}"
HERE="$(cd "$(dirname "$0")/../.." && pwd)"
export THROTTLELAB="${THROTTLELAB:-$OUTDIR/throttlelab-real}"
cd /tmp
# The capture's resident memory, every 60 s, while it runs.
rss() {
    while sleep 60; do
        for p in /proc/[0-9]*; do
            [ "$(readlink "$p/exe" 2>/dev/null)" = "$THROTTLELAB" ] && echo "$(date -u +%T) rss_kb $(awk '/^VmRSS/ {print $2}' "$p/status")"
        done
    done
}
date -u
echo "alone (wrk 30 s): $(CAPTURE=0 unshare -m --propagation private bash "$HERE/scripts/capture_nginx.sh" 20 | tr '\n' ' ')"
rss & SAMPLER=$!
unshare -m --propagation private bash "$HERE/scripts/capture_nginx.sh" "$SECS" "$OUTDIR/nginx$SECS.toml"
kill "$SAMPLER"
echo "alone (wrk 30 s): $(CAPTURE=0 unshare -m --propagation private bash "$HERE/scripts/capture_nginx.sh" 20 | tr '\n' ' ')"
ls -l "$OUTDIR"/nginx"$SECS".*
date -u
