#!/bin/bash
# issue 36 / const11: tick10's instruction counts (tick9's script: the busy built-ins shortened to
# 2 s, 1 s and 0.3 s, request-service.toml as it is, "rs"; callgrind on the engine alone,
# `simulate` with line tables) with per-instruction counts (--dump-instr=yes), so that an
# address's inline chain (addr2line -i) says which source line an inlined bounds check came from:
#   docs/engine-const11/callgrind.sh TAG [LOADS...]   (run from the worktree; LOADS of 8 64 256 rs,
#   default 64 256 rs; profiles in $OUT, default /tmp/const11, as cg-TAG-LOAD.out)
OUT=${OUT:-/tmp/const11} VG_OPTS="--dump-instr=yes ${VG_OPTS:-}" exec "$(dirname "$0")/../engine-tick9/callgrind.sh" "$@"
