#!/bin/bash
# issue 36 / speed12, one tl-measure hold (NOT run by speed12): main (e41f8fa, its package from
# /tmp/final11-site, or $BASE) against the branch (speed12, /work/venvs/speed12, rebuilt from the
# worktree's HEAD first), alternately, 3 rounds: the busy built-ins (bench --json --runs 5),
# `advise request-service --max-throttled 5% --json` and `reproduce --all --json`, wall clock;
# every advise output compared with main's first, every reproduce output with
# tests/golden/reproduce-all.json. Output in /tmp/speed12-hold.
# Run as `tl-measure bash docs/engine-speed12/measure.sh` (the scripts work from /tmp).
# Main's package, if /tmp/final11-site is missing or not e41f8fa's (a few minutes; better before
# the hold), then run with BASE=/tmp/speed12-base/site:
#   mkdir -p /tmp/speed12-base/src && git archive e41f8fa | tar -x -C /tmp/speed12-base/src
#   cd /tmp/speed12-base/src && CARGO_TARGET_DIR=/tmp/speed12-base/target /work/venvs/speed12/bin/pip \
#     install --no-deps --target /tmp/speed12-base/site -c constraints.txt --no-build-isolation .
exec "$(dirname "$0")/../../scripts/branch_hold.sh" speed12 "${BASE:-/tmp/final11-site}" /work/venvs/speed12 3
