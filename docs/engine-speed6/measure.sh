#!/bin/bash
# issue 36 / speed6: main (f0c256d, its installed package copied to /tmp/speed6-base/site
# before any change) against the branch (speed6, /work/venvs/perf), 3 rounds.
exec "$(dirname "$0")/../../scripts/bench_ab.sh" speed6 /tmp/speed6-base/site /work/venvs/perf 3
