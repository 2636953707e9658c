#!/bin/bash
# One tl-measure hold of a branch against main (issue 36): rebuild the branch's package in its
# venv from the worktree's HEAD, then scripts/advise_reproduce_ab.sh (the busy built-ins, advise
# request-service and reproduce --all, alternately, every output compared):
#   scripts/branch_hold.sh NAME BASE_SITE VENV ROUNDS   (output in /tmp/NAME-hold)
# BASE_SITE is main's package, built beforehand (each branch's measure.sh says how).
set -u
name=$1 base=$2 venv=$3 rounds=$4
root=$(cd "$(dirname "$0")/.." && pwd)
test -f $base/throttlelab/__init__.py || { echo "main's package missing: $base (see the measure script's head)"; exit 1; }
echo "== build $(git -C $root log --oneline -1 | cut -c1-60) $(date -u +%T)"
(cd $root && $venv/bin/pip install -q -c constraints.txt --no-build-isolation -e '.[test]') || exit 1
echo "== built $(date -u +%T)"
sleep 30
cd /tmp && "$root/scripts/advise_reproduce_ab.sh" $name $base $venv $rounds
echo "== done $(date -u +%T)"
