#!/bin/bash
# issue 36 / const11, one tl-measure hold (NOT run by const11): main (f8c94ea, its package built
# from `git archive f8c94ea` into /tmp/const11-base/site, see below) against the branch (const11,
# /work/venvs/const11, rebuilt from the worktree's HEAD first), alternately, 3 rounds: the busy
# built-ins (bench --json --runs 5), `advise request-service --max-throttled 5% --json` and
# `reproduce --all --json`, wall clock; every advise output compared with main's first, every
# reproduce output with tests/golden/reproduce-all.json. Output in /tmp/const11-hold.
# Run as `tl-measure bash docs/engine-const11/measure.sh` (the scripts work from /tmp).
# Main's package, if /tmp/const11-base/site is missing (a few minutes; better before the hold):
#   mkdir -p /tmp/const11-base/src && git archive f8c94ea | tar -x -C /tmp/const11-base/src
#   cd /tmp/const11-base/src && CARGO_TARGET_DIR=/tmp/const11-base/target /work/venvs/const11/bin/pip \
#     install --no-deps --target /tmp/const11-base/site -c constraints.txt --no-build-isolation .
exec "$(dirname "$0")/../../scripts/branch_hold.sh" const11 /tmp/const11-base/site /work/venvs/const11 3
