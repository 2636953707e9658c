#!/bin/bash
# issue 36 / speed7: main (3b1625e, its installed package copied to /tmp/speed7-base/site
# before any change) against the branch (speed7, /work/venvs/perf), 3 rounds.
exec "$(dirname "$0")/../../scripts/bench_ab.sh" speed7 /tmp/speed7-base/site /work/venvs/perf 3
