#!/bin/bash
# issue 36, speed14's hold (run as `tl-measure bash docs/engine-speed14/hold.sh`, from the worktree): the
# busy built-ins, main at e587f40 (/tmp/m14-site) against speed14 (/tmp/s14-site, or AFTER=), both
# `pip install --target` sites of `git archive` trees (the same kind of install), alternately, 3 rounds
# of `bench --json --runs 5`; then docs/engine-issue36/measure.sh with AFTER's site (advise and
# reproduce --all against the code the issue was filed on), by speed12's hold.sh; then
# scripts/parallel_seeds.py with AFTER's site (the process pool against threads, 2 workers, on today's
# engine). speed14 changes no output, so each round's event counts must be equal.
# BEFORE= and OUT= reuse it for a later branch (tick15: BEFORE=/tmp/m15-site AFTER=/tmp/t15-site,
# the sites built as below from c819346 and tick15; docs/engine.md, "(tick15)").
# The sites, if missing (a few minutes each; before the hold; from the worktree):
#   rm -rf /tmp/m14-src && mkdir -p /tmp/m14-src && git archive e587f40 | tar -x -C /tmp/m14-src
#   cd /tmp/m14-src && CARGO_TARGET_DIR=/tmp/m14-target /work/venvs/speed14/bin/pip install \
#     --no-deps --target /tmp/m14-site -c constraints.txt --no-build-isolation .
#   rm -rf /tmp/s14-src && mkdir -p /tmp/s14-src && git archive speed14 | tar -x -C /tmp/s14-src
#   cd /tmp/s14-src && CARGO_TARGET_DIR=/tmp/s14-target /work/venvs/speed14/bin/pip install \
#     --no-deps --target /tmp/s14-site -c constraints.txt --no-build-isolation .
# (/tmp/s14-target may start as a copy of /tmp/m14-target: cp -a, then the build is incremental.)
set -u
here=$(cd "$(dirname "$0")" && pwd)
before=${BEFORE:-/tmp/m14-site} after=${AFTER:-/tmp/s14-site}
for site in $before $after; do
  test -f $site/throttlelab/__init__.py || { echo "missing site: $site (see this script's head)"; exit 1; }
done
BEFORE=$before AFTER=$after OUT=${OUT:-/tmp/speed14-hold} bash "$here/../engine-speed12/hold.sh"
echo "== parallel seeds (scripts/parallel_seeds.py 3, $after)"
cd /tmp && PYTHONPATH=$after /work/venvs/main/bin/python "$here/../../scripts/parallel_seeds.py" 3
