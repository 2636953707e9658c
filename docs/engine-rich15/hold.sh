#!/bin/bash
# issue 36, rich15's hold (run as `tl-measure bash docs/engine-rich15/hold.sh`, from the worktree): the
# command's start without `rich`. main at c819346 (/tmp/m15-site) against rich15 (/tmp/r15-site, or
# AFTER=), both `pip install --target` sites of `git archive` trees, by docs/engine-issue36/measure.sh
# (BEFORE= main's site): 5 rounds, alternately, of `import throttlelab.cli` alone and of
# `advise request-service --cgroup app --max-throttled 5% --json`; advise's outputs compared (equal).
# Then each command's min and median. rich15 changes only Python: the two extensions are the same code.
# The sites, if missing (a few minutes; before the hold; from the worktree; one source directory and
# one target directory, so that the second build is incremental):
#   rm -rf /tmp/r15-src && mkdir -p /tmp/r15-src && git archive c819346 | tar -x -C /tmp/r15-src
#   cd /tmp/r15-src && CARGO_TARGET_DIR=/tmp/r15-target /work/venvs/rich15/bin/pip install \
#     --no-deps --target /tmp/m15-site -c constraints.txt --no-build-isolation .
#   cd - && rm -rf /tmp/r15-src && mkdir -p /tmp/r15-src && git archive rich15 | tar -x -C /tmp/r15-src
#   cd /tmp/r15-src && CARGO_TARGET_DIR=/tmp/r15-target /work/venvs/rich15/bin/pip install \
#     --no-deps --target /tmp/r15-site -c constraints.txt --no-build-isolation .
set -u
here=$(cd "$(dirname "$0")" && pwd)
before=/tmp/m15-site after=${AFTER:-/tmp/r15-site} out=/tmp/rich15-hold
for site in $before $after; do
  test -f $site/throttlelab/__init__.py || { echo "missing site: $site (see this script's head)"; exit 1; }
done
mkdir -p $out
BEFORE=$before ROUNDS=5 COMMANDS="start advise" OUT=$out bash "$here/../engine-issue36/measure.sh" /work/venvs/main $after \
  | tee $out/measure.log
python3 - $out/measure.log <<'PY'
import re, statistics, sys
walls, v = {}, None
for line in open(sys.argv[1]):
    if m := re.match(r"== round \d+: (\w+)", line):
        v = {"main": "rich15", "before": "main"}[m[1]]
    elif m := re.match(r"(.+) wall_s ([\d.]+)", line):
        walls.setdefault((m[1], v), []).append(float(m[2]))
for (cmd, v), w in sorted(walls.items()):
    print(f"{cmd:40s} {v:7s} n={len(w)} min {min(w):.3f} s median {statistics.median(w):.3f} s")
PY
