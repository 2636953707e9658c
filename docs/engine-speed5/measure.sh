#!/bin/bash
# issue 36 / speed5: main (929623a, its installed package copied to /tmp/speed5-base/site
# before any change) against the branch (speed5, /work/venvs/perf), 3 rounds.
exec "$(dirname "$0")/../../scripts/bench_ab.sh" speed5 /tmp/speed5-base/site /work/venvs/perf 3
