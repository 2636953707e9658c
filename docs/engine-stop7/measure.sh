#!/bin/bash
# issue 36 / stop7, one tl-measure hold: main (3b1625e, its installed package copied to
# /tmp/stop7-main-site before any change) against the branch (stop7, /work/venvs/docs),
# alternately, 3 rounds: `advise request-service --max-throttled 5% --json` (with the busy
# built-ins) and `reproduce --all --json`, wall clock, every output compared
# (scripts/advise_reproduce_ab.sh; the hold ran these lines inline);
# then events.py on the branch (one worker, in-process: events and engine seconds with
# Run.stop and with it ignored). Run from /tmp (tl-measure pauses processes whose working
# directory is under /work/wt).
set -u
here=$(cd "$(dirname "$0")" && pwd)
base=/tmp/stop7-main-site venv=/work/venvs/docs
"$here/../../scripts/advise_reproduce_ab.sh" stop7 $base $venv 3
echo "== events.py (stop7's package)"
$venv/bin/python "$here/events.py"
