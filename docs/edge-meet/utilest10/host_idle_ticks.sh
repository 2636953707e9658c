#!/bin/sh
# The host's idle ticks around one run of rs4 (sisutil9's row, profile 6.18): a tracefs
# instance of our own records sched_switch and the timers, as root:
#   sh docs/edge-meet/utilest10/host_idle_ticks.sh OUT   (the venv active)
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/idletick}
mkdir -p "$out"
sed 's/profile = "6.12"/profile = "6.18"/' "$here/../sisutil9/rs4-50-1.0.toml" > "$out/rs4.toml"
unshare -m --propagation private sh -c '
set -e
out=$1
mkdir -p "$out/tfs"
mount -t tracefs nodev "$out/tfs"
i="$out/tfs/instances/idle-$$"
mkdir "$i"
echo mono > "$i/trace_clock"
echo 16384 > "$i/buffer_size_kb"
for e in sched/sched_switch timer/hrtimer_expire_entry timer/hrtimer_start timer/hrtimer_cancel; do echo 1 > "$i/events/$e/enable"; done
echo 1 > "$i/tracing_on"
throttlelab real "$out/rs4.toml" > "$out/out.json"
echo 0 > "$i/tracing_on"
cat "$i/trace" > "$out/trace.txt"
rmdir "$i"
' sh "$out"
