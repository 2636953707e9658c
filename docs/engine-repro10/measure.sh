#!/bin/bash
# issue 36 / repro10, one tl-measure hold (NOT run by repro10: its session measured with
# callgrind only): main (5dafc83, its package as installed before any change, copied to
# /tmp/repro10-base/site) against the branch (repro10, /work/venvs/repro10, built from the
# worktree's HEAD), alternately, 3 rounds: the busy built-ins (bench --json --runs 5),
# `advise request-service --max-throttled 5% --json` and `reproduce --all --json`, wall
# clock; every advise output compared with main's first, every reproduce output with
# tests/golden/reproduce-all.json. Run as `tl-measure bash docs/engine-repro10/measure.sh`.
#
# If /tmp/repro10-base/site is gone, it is made again from main: its Python from
# `git archive 5dafc83`, its _native built from the same commit in /tmp/repro10-base/src
# (a few minutes of build, before the rounds).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
base=/tmp/repro10-base
if [ ! -f $base/site/throttlelab/_native.abi3.so ]; then
  echo "== main's package: building it from 5dafc83 $(date -u +%T)"
  rm -rf $base && mkdir -p $base/src $base/site
  git -C $root archive 5dafc83 | tar -x -C $base/src
  (cd $base/src && /work/venvs/repro10/bin/maturin build -q --release -o $base/wheel) || exit 1
  /work/venvs/repro10/bin/python -m pip install -q --no-deps --target $base/site $base/wheel/*.whl || exit 1
fi
echo "== main: $(sha256sum $base/site/throttlelab/_native.abi3.so | cut -c1-16), branch: $(git -C $root log --oneline -1 | cut -c1-60)"
exec "$root/scripts/advise_reproduce_ab.sh" repro10 $base/site /work/venvs/repro10 3
