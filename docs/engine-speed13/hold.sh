#!/bin/bash
# issue 36, speed13's hold (run as `tl-measure bash docs/engine-speed13/hold.sh`): the busy
# built-ins, main with ddq12 (/tmp/m13-site) against speed13 (/tmp/s13-site, or AFTER=), both
# `pip install --target` sites of `git archive` trees (the same kind of install), alternately,
# 3 rounds of `bench --json --runs 5`; then docs/engine-issue36/measure.sh with AFTER's site
# (advise and reproduce --all against the code the issue was filed on), by speed12's hold.sh. Each
# round prints both sides' event counts (speed13 changes no output, so they must be equal).
# The after site, if missing (a few minutes; before the hold; from the worktree):
#   rm -rf /tmp/s13-src && mkdir -p /tmp/s13-src && git archive speed13 | tar -x -C /tmp/s13-src
#   cd /tmp/s13-src && CARGO_TARGET_DIR=/tmp/s13-target /work/venvs/speed13/bin/pip install \
#     --no-deps --target /tmp/s13-site -c constraints.txt --no-build-isolation .
set -u
here=$(cd "$(dirname "$0")" && pwd)
for site in /tmp/m13-site ${AFTER:-/tmp/s13-site}; do
  test -f $site/throttlelab/__init__.py || { echo "missing site: $site (see this script's head)"; exit 1; }
done
BEFORE=/tmp/m13-site AFTER=${AFTER:-/tmp/s13-site} OUT=/tmp/speed13-hold exec bash "$here/../engine-speed12/hold.sh"
