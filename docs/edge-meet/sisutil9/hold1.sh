#!/bin/sh
# sisutil9's hold 1 (docs/fidelity.md, "SIS_UTIL's hint, traced in a 6.12 guest"):
#   tl-measure sh docs/edge-meet/sisutil9/hold1.sh OUT   (from the worktree, the venv active)
# The 6.12 guest's topology and symbols, then 3 runs of the edge grid's 4-thread
# run/sleep row at demand / quota 1.0 (50 ms / 69.93 ms, no burst) with SIS_UTIL's
# hint and every wake-up probed (guest_trace.py). If the default guest (-smp 2)
# has no LLC domain spanning both CPUs, the same with one socket of two cores.
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/sisutil9/hold1}
mkdir -p "$out"
date -u
python "$here/guest_trace.py" info > "$out/info-default.txt" 2>&1
date -u
python "$here/guest_trace.py" trace "$here/rs4-50-1.0.toml" "$out/t50" 3 > "$out/t50.txt" 2>&1
date -u
if ! grep -q 'SD_SHARE_LLC' "$out/info-default.txt"; then
  GUEST_SMP=2,sockets=1,cores=2 python "$here/guest_trace.py" info > "$out/info-1s2c.txt" 2>&1
  date -u
  GUEST_SMP=2,sockets=1,cores=2 python "$here/guest_trace.py" trace "$here/rs4-50-1.0.toml" "$out/t50-1s2c" 3 > "$out/t50-1s2c.txt" 2>&1
  date -u
fi
