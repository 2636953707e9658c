#!/bin/sh
# bgshape7's second and third holds (docs/fidelity.md, "The background's shape, traced through the probe and the runs"):
#   tl-measure sh docs/edge-diff/bgshape7/hold2.sh BURST   (from the worktree, the venv active; BURST 0 or 1)
# A fresh host sample of the edge grid's spinner rows at 20, 25, 30 and 40 ms with 2-4
# threads, with the probe's median from schedstat (probe.rs), while traced.sh's
# instance records every switch, as in hold.sh: the probe's median against the
# switches' in the same windows. (As run, the tracing was inline here, the same.)
set -e
o=docs/edge-diff/bgshape7
b=$1
date -u
rows=""
for t in 2 3 4; do for p in 20 25 30 40; do rows="$rows spin,$t,$p,$b"; done; done
sh $o/traced.sh $o/trace-burst$b.txt.gz python docs/edge-meet/fresh_rows.py $o/fresh-burst$b.json $rows --max-minutes 6
date -u
