#!/bin/bash
# queue8: the wall-clock hold, once hold A has built the venv.
log=/tmp/queue8/holdB.log
# No measurement starts after 19:30 UTC (the session's rule).
if [ "$(date -u +%H%M)" -ge 1930 ]; then echo "19:30 passed: not measured $(date)" >> $log; exit 1; fi
if ! /work/venvs/queue8/bin/python -c 'import throttlelab._native' 2>>$log; then echo "no venv: not measured $(date)" >> $log; exit 1; fi
echo "== measure $(date)" >> $log
bash /work/wt/queue8/docs/engine-queue8/measure.sh >> $log 2>&1
echo "== end $(date)" >> $log
