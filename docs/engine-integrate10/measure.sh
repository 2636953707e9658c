#!/bin/bash
# issue 36 / this stop's hold: main (5dafc83, its package copied to /tmp/repro10-base/site before
# any change) against the merged engine (hint10, repro10, queue10, tick10; /work/venvs/merge,
# the tree's HEAD), alternately, 3 rounds: the busy built-ins (bench --json --runs 5),
# `advise request-service --max-throttled 5% --json` and `reproduce --all --json`, wall clock.
#   tl-measure bash docs/engine-integrate10/measure.sh
# advise's output is not the same (the stored SIS_UTIL hint moves it, by design);
# reproduce --all's is, and is compared with tests/golden/reproduce-all.json.
exec "$(dirname "$0")/../../scripts/advise_reproduce_ab.sh" integrate10 /tmp/repro10-base/site /work/venvs/merge 3
