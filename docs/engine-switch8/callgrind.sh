#!/bin/bash
# issue 36 / switch8: speed6's instruction counts (the busy built-ins shortened to 2 s, 1 s
# and 0.3 s, callgrind on the engine alone), each change's delta as measured:
# docs/engine-switch8/callgrind.sh TAG [CPUS...] (run from the worktree; profiles in
# /tmp/switch8/cg-TAG-N.out; CPUS defaults to 8 64 256).
set -eu
tag=$1; shift
out=${OUT:-/tmp/switch8}
mkdir -p $out
CARGO_PROFILE_RELEASE_DEBUG=line-tables-only cargo build -q --release --example simulate -p throttlelab-core
for n in ${@:-8 64 256}; do
  case $n in 8) d=2 ;; 64) d=1 ;; 256) d=0.3 ;; esac
  sed "s/^duration_s = .*/duration_s = $d/" python/throttlelab/scenarios/bench-busy-${n}cpu.toml > $out/b$n.toml
  valgrind --tool=callgrind --callgrind-out-file=$out/cg-$tag-$n.out ${CARGO_TARGET_DIR:-target}/release/examples/simulate $out/b$n.toml > $out/cg-$tag-$n.txt 2> $out/cg-$tag-$n.err
  echo "$tag ${n} CPUs: $(cut -d' ' -f1,2 $out/cg-$tag-$n.txt) instructions $(grep -o 'Collected : [0-9]*' $out/cg-$tag-$n.err | awk '{print $3}')"
done
