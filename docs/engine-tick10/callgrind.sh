#!/bin/bash
# issue 36 / tick10: tick9's instruction counts (the busy built-ins shortened, callgrind on the
# engine alone, request-service.toml as it is: "rs"), profiles in /tmp/tick10 unless $OUT says:
# docs/engine-tick10/callgrind.sh TAG [LOADS...] (run from the worktree; LOADS of 8 64 256 rs,
# default 64 256 rs; the profiles as cg-TAG-LOAD.out).
OUT=${OUT:-/tmp/tick10} exec "$(dirname "$0")/../engine-tick9/callgrind.sh" "$@"
