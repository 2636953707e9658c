#!/bin/sh
# bgshape7's first hold (docs/fidelity.md, "The background's shape, traced through the probe and the runs"):
#   tl-measure sh docs/edge-diff/bgshape7/hold.sh   (from the worktree, the venv active)
# traced.sh's instance records every switch while compare probes and runs 2
# spinners at 20 ms / 40 ms (8 runs) and 30 ms / 60 ms (5 runs): the probe's
# 0.5 s before each run and the run's 2 s are both in the trace. (As run at
# 14:55 UTC the tracing was inline here, the same events and buffer, with a
# trace_marker line before each compare.)
set -e
o=docs/edge-diff/bgshape7
date -u
sh $o/traced.sh $o/trace.txt.gz sh -c "
throttlelab compare docs/edge-diff/spin20/spin2-20-40.toml --runs 8 --json > $o/compare-20.json
date -u
throttlelab compare docs/edge-diff/spin2-30-60.toml --runs 5 --json > $o/compare-30.json"
date -u
