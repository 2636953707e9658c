#!/bin/sh
# rel13 (docs/fidelity.md, "6.12's releases grid, traced"): the two run6-sleep4 rows of the
# 6.12 releases grid that still differ, traced in the 6.12 guest on a quiet host (the
# session's traces came from a host at load 5.5-6.8). About 3 minutes; from the worktree,
# its venv active:   tl-measure sh docs/edge-meet/rel13/hold.sh
# Then: python docs/edge-meet/rel13/periods.py /tmp/rel13-hold/*/trace-*.txt.gz
#       (cd docs/edge-meet/ddq12 && python tick_gaps.py /tmp/rel13-hold/*/trace-*.txt.gz)
set -e
d=docs/edge-meet/rel13
o=/tmp/rel13-hold
mkdir -p $o
for row in r2 r4; do
  throttlelab diff $d/$row.toml --kernel 6.12 --accel tcg --runs 5 -o $o/$row > $o/$row.txt 2>&1
  for f in $o/$row/run-*.bw.txt; do gzip -c "$f" > "$o/$row/trace-$(basename "$f" .bw.txt | cut -d- -f2).txt.gz"; done
done
