#!/bin/bash
# issue 36 / queue8: speed6's instruction counts (the busy built-ins shortened to 2 s, 1 s
# and 0.3 s, callgrind on the engine alone), each change's delta as measured:
# docs/engine-queue8/callgrind.sh TAG (run from the worktree; profiles in /tmp/queue8/cg-TAG-N.out).
OUT=/tmp/queue8 exec "$(dirname "$0")/../engine-speed6/callgrind.sh" "$@"
