#!/bin/sh
# rs4t8's hold (docs/fidelity.md, "Four threads at 1.0, limited, event by event"):
#   tl-measure sh docs/edge-meet/rs4t8/hold.sh OUT   (from the worktree, the venv active)
# `throttlelab diff` on the edge grid's 4-thread run/sleep rows at demand / quota
# 1.0 without burst (50 ms and 100 ms; the grid's TOML, fidelity_grid.scenario_text),
# while a tracefs instance of our own (trace_clock mono, the clock of diff's
# trace) adds what diff's trace lacks: wake-ups with their target CPU and
# migrations. Raw traces go to OUT (not kept in git).
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/rs4t8/hold}
mkdir -p "$out" "$out/tfs"
export THROTTLELAB_START_DELAY_MS=500
unshare -m --propagation private sh -c '
set -e
here=$1; out=$2
mount -t tracefs nodev "$out/tfs"
i="$out/tfs/instances/rs4t8-$$"
mkdir "$i"
trap "echo 0 > $i/tracing_on; rmdir $i" EXIT
echo mono > "$i/trace_clock"
echo 16384 > "$i/buffer_size_kb"
for e in sched/sched_waking sched/sched_wakeup sched/sched_wakeup_new sched/sched_migrate_task; do
  echo 1 > "$i/events/$e/enable"
done
echo 1 > "$i/tracing_on"
date -u
throttlelab diff "$here/rs4-50-1.0.toml" --runs 4 -o "$out/d50" > "$out/d50.txt" 2>&1
date -u
throttlelab diff "$here/rs4-100-1.0.toml" --runs 4 -o "$out/d100" > "$out/d100.txt" 2>&1
date -u
echo 0 > "$i/tracing_on"
grep -h overrun "$i"/per_cpu/cpu*/stats
cat "$i/trace" > "$out/wake.trace"
' sh "$here" "$out"
