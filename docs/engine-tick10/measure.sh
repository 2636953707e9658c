#!/bin/bash
# issue 36 / tick10, one tl-measure hold (NOT run by tick10): main (5dafc83, its package built
# from `git archive 5dafc83` into /tmp/tick10-base/site, see below) against the branch (tick10,
# /work/venvs/tick10, rebuilt from the worktree's HEAD first), alternately, 3 rounds: the busy
# built-ins (bench --json --runs 5), `advise request-service --max-throttled 5% --json` and
# `reproduce --all --json`, wall clock; every advise output compared with main's first, every
# reproduce output with tests/golden/reproduce-all.json. Output in /tmp/tick10-hold.
# Run as `tl-measure bash docs/engine-tick10/measure.sh` (the scripts work from /tmp).
# Main's package, if /tmp/tick10-base/site is missing (a few minutes; better before the hold):
#   mkdir -p /tmp/tick10-base/src && git archive 5dafc83 | tar -x -C /tmp/tick10-base/src
#   cd /tmp/tick10-base/src && CARGO_TARGET_DIR=/tmp/tick10-base/target /work/venvs/tick10/bin/pip \
#     install --no-deps --target /tmp/tick10-base/site -c constraints.txt --no-build-isolation .
exec "$(dirname "$0")/../../scripts/branch_hold.sh" tick10 /tmp/tick10-base/site /work/venvs/tick10 3
