#!/bin/bash
# issue 36 / speed7: speed6's instruction counts (the busy built-ins shortened to 2 s, 1 s
# and 0.3 s, callgrind on the engine alone), each change's delta as measured:
# docs/engine-speed7/callgrind.sh TAG (run from the worktree; profiles in /tmp/speed7/cg-TAG-N.out).
OUT=/tmp/speed7 exec "$(dirname "$0")/../engine-speed6/callgrind.sh" "$@"
