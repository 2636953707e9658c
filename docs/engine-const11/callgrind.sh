#!/bin/bash
# issue 36 / const11: tick10's instruction counts (the busy built-ins shortened to 2 s, 1 s and
# 0.3 s, request-service.toml as it is: "rs"; callgrind on the engine alone, `simulate` with line
# tables) with per-instruction counts (--dump-instr=yes), so that `callgrind_annotate` can say
# which source line an inlined bounds check or pop came from:
#   docs/engine-const11/callgrind.sh TAG [LOADS...]   (run from the worktree; LOADS of 8 64 256 rs,
#   default 64 256 rs; profiles in $OUT, default /tmp/const11, as cg-TAG-LOAD.out)
set -eu
tag=$1; shift
out=${OUT:-/tmp/const11}
mkdir -p $out
CARGO_PROFILE_RELEASE_DEBUG=line-tables-only cargo build -q --release --example simulate -p throttlelab-core
# A copy per tag: the tree may change (the next build) while the loads run.
cp ${CARGO_TARGET_DIR:-target}/release/examples/simulate $out/simulate-$tag
for n in ${@:-64 256 rs}; do
  case $n in
    rs) cp python/throttlelab/scenarios/request-service.toml $out/brs.toml ;;
    *) case $n in 8) d=2 ;; 64) d=1 ;; 256) d=0.3 ;; esac
       sed "s/^duration_s = .*/duration_s = $d/" python/throttlelab/scenarios/bench-busy-${n}cpu.toml > $out/b$n.toml ;;
  esac
  valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=$out/cg-$tag-$n.out \
    $out/simulate-$tag $out/b$n.toml > $out/cg-$tag-$n.txt 2> $out/cg-$tag-$n.err
  echo "$tag $n: $(cut -d' ' -f1,2 $out/cg-$tag-$n.txt) instructions $(grep -o 'Collected : [0-9]*' $out/cg-$tag-$n.err | awk '{print $3}')"
done
