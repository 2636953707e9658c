#!/bin/bash
# issue 36 / switch8's hold, as run: `tl-measure bash docs/engine-switch8/hold.sh`. The holds
# of others left no time between them to build, so the branch's package is built (from the
# worktree's HEAD) inside the hold, then the host rests 30 s, then measure.sh.
set -u
export PATH=/work/venvs/switch8/bin:$PATH
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
echo "== build $(git -C $root log --oneline -1 | cut -c1-60) $(date -u +%T)"
(cd $root && /work/venvs/switch8/bin/pip install -q -c constraints.txt --no-build-isolation -e '.[test]') || exit 1
echo "== built $(date -u +%T)"
sleep 30
cd /tmp && bash "$here/measure.sh"
echo "== done $(date -u +%T)"
