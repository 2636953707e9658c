#!/bin/sh
# The tl-measure hold of docs/fidelity.md's "6.1 under TCG" (issue #34), from the worktree, the venv active:
#   tl-measure sh docs/edge-diff/6.1/hold.sh
# 6.1 as Debian boots it under TCG (its TSC calibrated against the PIT, 13 times slow), then
# given the host's TSC frequency (2596138 kHz, the host's "tsc: Detected"), then that and
# tsc=reliable (sched_clock stable, as 6.12's guest marks it by itself).
d=docs/edge-diff/6.1
o=${OUT:-/tmp/edge61}
fix="tsc_early_khz=2596138 tsc=reliable"
mkdir -p $o
run() { # NAME APPEND ARGS...
    name=$1; append=$2; shift 2
    GUEST_APPEND="$append" timeout 120 python $d/guest.py diff "$@" --kernel 6.1 --accel tcg --runs 3 -o $o/$name > $o/$name.txt 2>&1
}
GUEST_APPEND="" timeout 60 python $d/guest.py clock 6.1 > $o/clock-default.txt 2>&1
GUEST_APPEND="$fix" timeout 60 python $d/guest.py clock 6.1 > $o/clock-fixed.txt 2>&1
run default "" $d/spin2-100-150.toml
run fixed "$fix" $d/spin2-100-150.toml
run khz "tsc_early_khz=2596138" $d/spin2-100-150.toml
run default-burst "" $d/spin2-100-150-75.toml
run fixed-burst "$fix" $d/spin2-100-150-75.toml
