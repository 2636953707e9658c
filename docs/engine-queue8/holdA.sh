#!/bin/bash
# queue8: the non-timed work that needs CPU (no gap between holds since 18:05):
# the venv's build, the Rust tests (golden included), the callgrind counts; then hold B
# (the wall clock) queued.
cd /work/wt/queue8
log=/tmp/queue8/holdA.log
echo "== venv $(date)" >> $log
( timeout 240 bash -c 'python3 -m venv /work/venvs/queue8 && source /work/venvs/queue8/bin/activate && pip install -q -c constraints.txt --no-build-isolation maturin && pip install -q -c constraints.txt --no-build-isolation -e ".[test]"' ) >> $log 2>&1; echo "venv rc $?" >> $log
# As run at 19:01 this line lacked `9>&-`: the subshell kept hold A's lock (fd 9) open after
# hold A ended (19:06:52), and every hold waited until it was killed at 19:15:54.
(cd /tmp && setsid tl-measure bash /tmp/queue8/holdB.sh > /tmp/queue8/holdB.out 2>&1 < /dev/null 9>&- &)
echo "== tests $(date)" >> $log
timeout 240 cargo test -p throttlelab-core -p throttlelab-real --release -q > /tmp/queue8/tests.log 2>&1; echo "tests rc $?" >> $log
grep -E "test result|FAILED|panicked" /tmp/queue8/tests.log | sort | uniq -c >> $log
echo "== callgrind $(date)" >> $log
timeout 120 docs/engine-queue8/callgrind.sh wheel >> $log 2>&1; echo "callgrind rc $?" >> $log
echo "== end $(date)" >> $log
