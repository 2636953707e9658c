#!/bin/bash
# issue 36 / queue10, one tl-measure hold: main (5dafc83: its python/throttlelab from
# `git archive 5dafc83` with the _native.abi3.so, throttlelab-real and throttlelab-worker built
# by `pip install -e` in the queue10 worktree with crates/ checked out at 5dafc83, copied to
# /tmp/queue10-base/site; sha256 of _native in /tmp/queue10-base/native.sha256) against the branch
# (queue10, /work/venvs/queue10), alternately, 3 rounds: the busy built-ins (bench --json
# --runs 5), `advise request-service --max-throttled 5% --json` and `reproduce --all --json`,
# wall clock; every advise output compared with main's first, every reproduce output with
# tests/golden/reproduce-all.json. Not run by queue10 (its session measured instructions only).
#   tl-measure bash docs/engine-queue10/measure.sh      (log and records in /tmp/queue10-hold)
exec "$(dirname "$0")/../../scripts/advise_reproduce_ab.sh" queue10 /tmp/queue10-base/site /work/venvs/queue10 3
