#!/bin/bash
# issue 36 / queue9: instructions of the engine alone (`simulate`, built with line tables),
# main's build against the branch's, on the busy built-ins shortened (2 s, 1 s, 0.3 s, as
# speed6 and queue8 measured them) and on loads the busy ones are not: request-service as it
# is (60 s, HZ=250, advise's scenario), chiluk-fibtest (88 CPUs, HZ=250), hegde-interleave-1cg
# (HZ=100) and thiyyakat-hcu-cfs (4 CPUs, HZ=250, 6.4 M events; it and its five siblings are
# most of `reproduce --all`'s time).
#   docs/engine-queue9/callgrind.sh TAG BINARY [LOAD...]   (from the worktree; out in /tmp/queue9)
set -eu
tag=$1 bin=$2; shift 2
out=/tmp/queue9
mkdir -p $out
loads=${*:-b8 b64 b256 request-service chiluk-fibtest hegde-interleave-1cg thiyyakat-hcu-cfs}
for l in $loads; do
  case $l in
    b8) d=2 n=8 ;; b64) d=1 n=64 ;; b256) d=0.3 n=256 ;; *) d= ;;
  esac
  if [ -n "$d" ]; then
    sed "s/^duration_s = .*/duration_s = $d/" python/throttlelab/scenarios/bench-busy-${n}cpu.toml > $out/$l.toml
  else
    cp python/throttlelab/scenarios/$l.toml $out/$l.toml
  fi
  valgrind --tool=callgrind --callgrind-out-file=$out/cg-$tag-$l.out $bin $out/$l.toml > $out/cg-$tag-$l.txt 2> $out/cg-$tag-$l.err
  echo "$(date -u +%H:%M) $tag $l $(cut -d' ' -f1,2 $out/cg-$tag-$l.txt) instructions $(grep -o 'Collected : [0-9]*' $out/cg-$tag-$l.err | awk '{print $3}')"
done
