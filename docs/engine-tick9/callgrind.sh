#!/bin/bash
# issue 36 / tick9: instruction counts as switch8's (the busy built-ins shortened to 2 s, 1 s
# and 0.3 s, callgrind on the engine alone) plus request-service.toml as it is (60 s: advise's
# load, "rs"): docs/engine-tick9/callgrind.sh TAG [LOADS...] (run from the worktree; LOADS of
# 8 64 256 rs, default 64 256 rs; profiles in $OUT, default /tmp/tick9, as cg-TAG-LOAD.out;
# valgrind's further options in $VG_OPTS, none by default).
set -eu
tag=$1; shift
out=${OUT:-/tmp/tick9}
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
  valgrind --tool=callgrind ${VG_OPTS:-} --callgrind-out-file=$out/cg-$tag-$n.out $out/simulate-$tag $out/b$n.toml > $out/cg-$tag-$n.txt 2> $out/cg-$tag-$n.err
  echo "$tag $n: $(cut -d' ' -f1,2 $out/cg-$tag-$n.txt) instructions $(grep -o 'Collected : [0-9]*' $out/cg-$tag-$n.err | awk '{print $3}')"
done
