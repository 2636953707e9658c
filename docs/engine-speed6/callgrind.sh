#!/bin/bash
# issue 36 / speed6: instructions of the engine alone on the busy built-ins, shortened
# (2 s, 1 s, 0.3 s), as each change's delta was measured: docs/engine-speed6/callgrind.sh TAG
# (run from the worktree; profiles in /tmp/speed6/cg-TAG-N.out, or $OUT).
set -eu
tag=$1 out=${OUT:-/tmp/speed6}
mkdir -p $out
CARGO_PROFILE_RELEASE_DEBUG=line-tables-only cargo build -q --release --example simulate -p throttlelab-core
for n in 8 64 256; do
  case $n in 8) d=2 ;; 64) d=1 ;; 256) d=0.3 ;; esac
  sed "s/^duration_s = .*/duration_s = $d/" python/throttlelab/scenarios/bench-busy-${n}cpu.toml > $out/b$n.toml
  valgrind --tool=callgrind --callgrind-out-file=$out/cg-$tag-$n.out target/release/examples/simulate $out/b$n.toml > $out/cg-$tag-$n.txt 2> $out/cg-$tag-$n.err
  echo "$tag ${n} CPUs: $(cut -d' ' -f1,2 $out/cg-$tag-$n.txt) instructions $(grep -o 'Collected : [0-9]*' $out/cg-$tag-$n.err | awk '{print $3}')"
done
