#!/bin/bash
# over14's wall-clock hold, for the lead (run as `tl-measure bash docs/edge-meet/over14/hold.sh`):
# the busy built-ins, main (e587f40, /tmp/over14-main-site) against this branch (start_cpu honoured,
# /tmp/over14-site), by speed12's hold.sh (3 alternating rounds of `bench --json --runs 5`, then
# engine-issue36/measure.sh). The branch is a trace branch: start_cpu changes where threads start,
# so the event counts differ between the sides; no speed change is intended.
# The sites, if missing (a few minutes each; before the hold, outside it):
#   for v in main:e587f40 over14:over14; do n=${v%%:*} c=${v#*:}; rm -rf /tmp/over14-$n-src
#     mkdir -p /tmp/over14-$n-src && git -C /work/wt/over14 archive $c | tar -x -C /tmp/over14-$n-src
#     (cd /tmp/over14-$n-src && CARGO_TARGET_DIR=/tmp/over14-$n-target /work/venvs/over14/bin/pip install \
#       --no-deps --target /tmp/over14-$n-site -c constraints.txt --no-build-isolation .); done
#   mv /tmp/over14-over14-site /tmp/over14-site
set -u
here=$(cd "$(dirname "$0")" && pwd)
for site in /tmp/over14-main-site /tmp/over14-site; do
  test -f $site/throttlelab/__init__.py || { echo "missing site: $site (see this script's head)"; exit 1; }
done
BEFORE=/tmp/over14-main-site AFTER=/tmp/over14-site OUT=/tmp/over14-hold exec bash "$here/../../engine-speed12/hold.sh"
